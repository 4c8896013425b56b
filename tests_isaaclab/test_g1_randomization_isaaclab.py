"""The task's domain randomization on Isaac Lab's ``DirectRLEnv`` (``G1WalkDirectEnv``), kit-less on
CPU: the same ``RandomizationCfg`` the MuJoCo backends read, written through the articulation's
setters. Run through ``scripts/isaaclab_tier.sh``."""

from __future__ import annotations

import torch

from isaac_adapter.tasks.g1_walk import G1WalkConfig
from isaac_adapter.tasks.g1_walk.randomization import RandomizationCfg


def build(num_envs: int, **randomization):
    from isaac_adapter.isaaclab.g1_direct import make_g1_direct_env

    task = G1WalkConfig(num_envs=num_envs, device="cpu", randomization=RandomizationCfg(**randomization))
    return make_g1_direct_env(task)


def test_a_reset_draws_masses_and_gains_for_the_ended_envs_only():
    env = build(4, link_mass_scale=(0.8, 1.2), kp_scale=(0.5, 1.5))
    task = env.unwrapped
    env.reset()
    before = {k: v.clone() for k, v in task.physics_params.items()}
    mass_before = task.robot.data.body_mass.clone() if hasattr(task.robot.data.body_mass, "clone") else None
    task._reset_idx(torch.tensor([0, 2]))
    for name, value in task.physics_params.items():
        assert torch.equal(value[[1, 3]], before[name][[1, 3]]) and not torch.equal(value[[0, 2]], before[name][[0, 2]])
    from isaac_adapter.isaaclab.robot import as_torch

    mass = as_torch(task.robot.data.body_mass)[:, task._link_ids]
    torch.testing.assert_close(mass, task._nominal["mass"][:, task._link_ids] * task.physics_params["link_mass_scale"])
    if mass_before is not None:
        assert torch.equal(as_torch(mass_before)[[1, 3]][:, task._link_ids], mass[[1, 3]])


def test_a_push_adds_the_kick_to_the_chosen_envs():
    env = build(3, push_interval_s=(1.0, 2.0), push_velocity=(-0.5, 0.5))
    task = env.unwrapped
    env.reset()
    task.push_steps_left = torch.tensor([1, 30, 30], device=task.device)
    env.step(torch.zeros(3, env.num_actions, device=task.device))
    assert (task.last_push[0, :2] != 0).all() and torch.equal(task.last_push[1:], torch.zeros_like(task.last_push[1:]))


def test_every_physical_parameter_reaches_the_simulator_for_the_ended_envs_only():
    """Masses (and the inertias with them), the base's centre of mass, armature, joint friction,
    stiffness and damping, written by Isaac Lab's mask setters: the simulator's values of the ended
    envs are the nominal ones times the draws (plus the offset), those of the others stay as they were."""
    from isaac_adapter.isaaclab.robot import as_torch

    env = build(4, link_mass_scale=(0.8, 1.2), base_com_offset=(-0.05, 0.05), armature_scale=(0.8, 1.2),
                joint_friction_scale=(0.5, 2.0), kp_scale=(0.8, 1.2), kd_scale=(0.8, 1.2))
    task = env.unwrapped
    env.reset()
    d, joints, links = task.robot.data, task._joint_index, task._link_index
    read = {"mass": lambda: as_torch(d.body_mass)[:, links], "inertia": lambda: as_torch(d.body_inertia)[:, links],
            "com": lambda: as_torch(d.body_com_pose_b)[:, task._base_index[0], :3],
            "armature": lambda: as_torch(d.joint_armature)[:, joints], "friction": lambda: as_torch(d.joint_friction_coeff)[:, joints],
            "stiffness": lambda: as_torch(d.joint_stiffness)[:, joints], "damping": lambda: as_torch(d.joint_damping)[:, joints]}
    before = {k: f().clone() for k, f in read.items()}
    task._reset_idx(torch.tensor([True, False, True, False]))
    p, nominal = task.physics_params, task._nominal
    expected = {"mass": nominal["mass"][:, links] * p["link_mass_scale"],
                "inertia": nominal["inertia"][:, links] * p["link_mass_scale"].unsqueeze(-1),  # as on MuJoCo
                "com": nominal["com"][:, task._base_index[0], :3] + p["base_com_offset"],
                "armature": nominal["armature"][:, joints] * p["armature_scale"],
                "friction": nominal["friction"][:, joints] * p["joint_friction_scale"],
                "stiffness": nominal["stiffness"][:, joints] * p["kp_scale"],
                "damping": nominal["damping"][:, joints] * p["kd_scale"]}
    for key, f in read.items():
        now = f()
        torch.testing.assert_close(now[[0, 2]], expected[key][[0, 2]], msg=key)
        assert torch.equal(now[[1, 3]], before[key][[1, 3]]), key
        assert not torch.allclose(now[[0, 2]], before[key][[0, 2]]), key


def test_a_push_changes_the_chosen_envs_root_velocity_alone():
    """The kick is added to the base's velocity of the chosen envs (every point of it: the spin is
    kept), the others' velocities unchanged."""
    from isaac_adapter.isaaclab.robot import as_torch

    env = build(3, push_interval_s=(1.0, 2.0), push_velocity=(-0.5, 0.5))
    task = env.unwrapped
    env.reset()
    for _ in range(3):
        env.step(0.3 * torch.ones(3, env.num_actions))
    d = task.robot.data
    lin, ang = as_torch(d.root_link_lin_vel_w).clone(), as_torch(d.root_link_ang_vel_w).clone()
    delta = torch.tensor([[0.4, -0.3, 0.0], [0.2, 0.2, 0.0], [0.1, 0.1, 0.0]])
    task._push_root_velocity(torch.tensor([True, False, False]), delta)
    torch.testing.assert_close(as_torch(d.root_link_lin_vel_w)[0], lin[0] + delta[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(as_torch(d.root_link_ang_vel_w), ang, atol=1e-6, rtol=0)
    assert torch.equal(as_torch(d.root_link_lin_vel_w)[1:], lin[1:])


FOOT_FLOOR_GEOMS = {f"{side}_foot{i}_collision" for side in ("left", "right") for i in (1, 2, 3)}  # the MJCF's foot-floor pairs


def test_foot_friction_reaches_the_solver_for_the_ended_envs_only():
    """The drawn foot-ground friction lands in the sliding friction of the solver's foot colliders
    (each env's own world) at the next physics step, for the ended envs only; every other geom,
    the ground's included, keeps its friction."""
    from isaaclab_newton.physics import NewtonManager

    env = build(4, friction=(0.3, 0.6))  # the MJCF's pairs say 1.0: every draw differs from it
    task = env.unwrapped
    env.reset()
    zeros = torch.zeros(4, env.num_actions)
    env.step(zeros)  # the reset's draws for every env reach the solver with this step
    solver = NewtonManager._solver
    labels = NewtonManager.get_model().shape_label
    shape_of_geom = solver.mjc_geom_to_newton_shape.numpy()  # [worlds, geoms] -> model shape
    on_foot = torch.tensor([labels[int(s)].rsplit("/", 1)[-1] in FOOT_FLOOR_GEOMS for s in shape_of_geom[0]])
    assert int(on_foot.sum()) == len(FOOT_FLOOR_GEOMS)

    def sliding() -> torch.Tensor:
        return torch.as_tensor(solver.mjw_model.geom_friction.numpy()[..., 0])  # [worlds, geoms]

    first = task.physics_params["friction"].clone()
    before = sliding()
    torch.testing.assert_close(before[:, on_foot], first.unsqueeze(-1).expand(-1, int(on_foot.sum())))
    task._reset_idx(torch.tensor([True, False, True, False]))
    env.step(zeros)
    after, drawn = sliding(), task.physics_params["friction"]
    assert torch.equal(drawn[[1, 3]], first[[1, 3]]) and not torch.equal(drawn[[0, 2]], first[[0, 2]])
    torch.testing.assert_close(after[:, on_foot], drawn.unsqueeze(-1).expand(-1, int(on_foot.sum())))
    assert torch.equal(after[[1, 3]], before[[1, 3]])
    assert torch.equal(after[:, ~on_foot], before[:, ~on_foot])


def test_the_solver_takes_the_draws_and_keeps_mujocos_derived_constants_nominal():
    """After a draw the solver's per-world MuJoCo model holds Newton's values of every drawn
    parameter (masses, inertias, centres of mass, armature, joint friction, the drives' gains), the
    subtree masses summed from them, and no model change is left queued for a step to apply; the
    constants MuJoCo derives from masses and armature (``body_invweight0``, ``dof_invweight0``,
    ``actuator_acc0``) are the same in every world, as on the MuJoCo backends, not derived again
    from each world's draws."""
    from isaaclab_newton.physics import NewtonManager

    env = build(4, link_mass_scale=(0.8, 1.2), base_com_offset=(-0.05, 0.05), armature_scale=(0.8, 1.2),
                joint_friction_scale=(0.5, 2.0), kp_scale=(0.8, 1.2), kd_scale=(0.8, 1.2))
    task = env.unwrapped
    env.reset()
    zeros = torch.zeros(4, env.num_actions)
    env.step(zeros)
    task._reset_idx(torch.tensor([True, False, True, False]))
    assert not NewtonManager._model_changes
    env.step(zeros)
    solver, model = NewtonManager._solver, NewtonManager.get_model()
    m = solver.mjw_model

    def n(array) -> torch.Tensor:
        return torch.as_tensor(array.numpy())

    bodies = n(solver.mjc_body_to_newton)  # [worlds, MuJoCo bodies] -> Newton body, -1 for the world
    on = bodies >= 0
    mass = n(m.body_mass)
    assert torch.equal(mass[on], n(model.body_mass)[bodies[on]])
    assert not torch.equal(mass[0], mass[1])  # each world its own draw
    torch.testing.assert_close(n(m.body_subtreemass)[:, 0].double(), mass.double().sum(1), rtol=1e-6, atol=0)
    # principal moments against Newton's inertia tensors: the trace is kept by the diagonalisation
    trace = n(model.body_inertia).diagonal(dim1=-2, dim2=-1).sum(-1)
    torch.testing.assert_close(n(m.body_inertia)[on].sum(-1), trace[bodies[on]], rtol=1e-5, atol=1e-7)
    dofs = n(solver.mjc_dof_to_newton_dof)  # [worlds, MuJoCo dofs] -> Newton dof
    assert torch.equal(n(m.dof_armature)[dofs >= 0], n(model.joint_armature)[dofs[dofs >= 0]])
    assert torch.equal(n(m.dof_frictionloss)[dofs >= 0], n(model.joint_friction)[dofs[dofs >= 0]])
    per_world = model.joint_dof_count // 4
    code = n(solver.mjc_actuator_to_newton_idx)  # >= 0: a position servo of that dof; <= -2: a velocity one
    world = torch.arange(4).unsqueeze(-1)
    gain = n(m.actuator_gainprm)[..., 0]  # [worlds, actuators]
    kp, kd = n(model.joint_target_ke), n(model.joint_target_kd)
    assert torch.equal(gain[:, code >= 0], kp[world * per_world + code[code >= 0]])
    assert torch.equal(gain[:, code <= -2], kd[world * per_world - (code[code <= -2] + 2)])
    for name in ("body_invweight0", "dof_invweight0", "actuator_acc0"):
        derived = n(getattr(m, name))
        assert derived.shape[0] == 4, name  # per world: a re-derivation would show
        # the worlds' float32 kinematics at their own origins differ in the last bits; a draw moves these 5-20 %
        torch.testing.assert_close(derived, derived[:1].expand_as(derived), rtol=1e-4, atol=1e-3, msg=name)


def test_the_benchmarks_check_of_the_draws_holds_after_a_reset_and_finds_a_draw_the_simulator_missed():
    """``benchmarks/isaaclab_step.py --graph-step`` judges the recorded step's draws with
    ``draws_after_replays``; here after an eager reset of envs 0 and 2 of 4: every line holds. With
    env 1's drawn gains changed in the task alone (the simulator never told), the lines of the kept
    draws and of Newton's stiffness say so, and the solver's lines still hold."""
    from isaac_adapter.app.bench.isaaclab_draws import draws_after_replays

    env = build(4, friction=(0.4, 1.2), link_mass_scale=(0.8, 1.2), base_com_offset=(-0.05, 0.05),
                armature_scale=(0.8, 1.2), joint_friction_scale=(0.5, 2.0), kp_scale=(0.8, 1.2), kd_scale=(0.8, 1.2))
    task = env.unwrapped
    env.reset()
    before = {k: v.clone() for k, v in task.physics_params.items()}
    ended = torch.tensor([True, False, True, False])
    task._reset_idx(ended)
    env.step(torch.zeros(4, env.num_actions))
    checks = draws_after_replays(task, before, ended)
    assert len(checks) == 16 and all(checks.values()), checks
    task.physics_params["kp_scale"][1] *= 1.01
    checks = draws_after_replays(task, before, ended)
    failed = {name for name, ok in checks.items() if not ok}
    assert failed == {"envs that did not end kept their draws", "Newton's model: nominal drive stiffness x draw"}, checks
