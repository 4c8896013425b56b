"""The robust task's physical draws on Isaac Lab after a recorded step's replays: where they went.

``benchmarks/isaaclab_step.py --graph-step`` runs :func:`draws_after_replays` after a few replays of
a task that draws physical parameters at its resets (``G1-Walk-Robust-v0``); ``tests_isaaclab``
holds it to an eager reset and to a draw the simulator missed.
"""

from __future__ import annotations

from typing import Any

import torch

# replays after which the draws are checked: few, so that some envs end and most go on
DRAW_CHECK_STEPS = 5


def draws_after_replays(base: Any, before: dict[str, torch.Tensor], ended: torch.Tensor) -> dict[str, bool]:
    """After replays of the recorded step that reset the ``ended`` envs (``[N]`` bool): did those envs
    draw again and the others keep their draws (``before``: the task's ``physics_params`` then), does
    Newton's model hold nominal x draw for every env, and the solver's per-world MuJoCo Warp model
    Newton's values? Each check's name and whether it holds."""
    from isaaclab_newton.physics import NewtonManager

    from isaac_adapter.isaaclab.robot import as_torch

    drawn, data, nominal = base.physics_params, base.robot.data, base._nominal
    links, joints = base._link_index, base._joint_index
    kept = ~ended
    checks = {
        "some envs ended, some went on": bool(ended.any()) and bool(kept.any()),
        "envs that did not end kept their draws": all(torch.equal(v[kept], before[k][kept]) for k, v in drawn.items()),
        "every env that ended drew again": bool(ended.any()) and all(
            bool((v[ended] != before[k][ended]).reshape(int(ended.sum()), -1).any(1).all()) for k, v in drawn.items()),
    }
    model_rows = (("link masses", data.body_mass, "mass", links, "link_mass_scale"),
                  ("armature", data.joint_armature, "armature", joints, "armature_scale"),
                  ("drive stiffness", data.joint_stiffness, "stiffness", joints, "kp_scale"),
                  ("drive damping", data.joint_damping, "damping", joints, "kd_scale"))
    for what, value, key, cols, name in model_rows:
        if name in drawn:
            expected = nominal[key][:, cols] * drawn[name]
            checks[f"Newton's model: nominal {what} x draw"] = torch.equal(as_torch(value)[:, cols], expected)
    if "friction" in drawn:
        feet = base._shape_friction[:, base._foot_friction_cols]
        checks["Newton's model: the feet's friction drawn"] = torch.equal(feet, drawn["friction"].unsqueeze(-1).expand_as(feet))
    solver, model = NewtonManager._solver, NewtonManager.get_model()
    mjw = solver.mjw_model

    def host(array: Any) -> torch.Tensor:
        return torch.as_tensor(array.numpy())

    body, dof, geom = host(solver.mjc_body_to_newton), host(solver.mjc_dof_to_newton_dof), host(solver.mjc_geom_to_newton_shape)
    code = host(solver.mjc_actuator_to_newton_idx)  # >= 0: a position servo of that dof; <= -2: a velocity one
    per_world, world = model.joint_dof_count // base.num_envs, torch.arange(base.num_envs).unsqueeze(-1)
    gain = host(mjw.actuator_gainprm)[..., 0]
    pairs = (("masses", host(mjw.body_mass)[body >= 0], host(model.body_mass)[body[body >= 0]]),
             ("centres of mass", host(mjw.body_ipos)[body >= 0], host(model.body_com)[body[body >= 0]]),
             ("armature", host(mjw.dof_armature)[dof >= 0], host(model.joint_armature)[dof[dof >= 0]]),
             ("joint friction", host(mjw.dof_frictionloss)[dof >= 0], host(model.joint_friction)[dof[dof >= 0]]),
             ("drive stiffness", gain[:, code >= 0], host(model.joint_target_ke)[world * per_world + code[code >= 0]]),
             ("drive damping", gain[:, code <= -2], host(model.joint_target_kd)[world * per_world - (code[code <= -2] + 2)]),
             ("friction", host(mjw.geom_friction)[..., 0][geom >= 0], host(model.shape_material_mu)[geom[geom >= 0]]))
    for what, solver_value, newton_value in pairs:
        checks[f"the solver's model: Newton's {what}"] = torch.equal(solver_value, newton_value)
    checks["no model change left queued"] = not NewtonManager._model_changes
    return checks
