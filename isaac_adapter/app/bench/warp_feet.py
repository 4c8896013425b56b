"""The G1's two foot boxes pressed together, on MuJoCo Warp and on CPU MuJoCo: which collider agrees.

    python benchmarks/warp_feet.py                    # Warp's CPU device (no GPU needed)
    python benchmarks/warp_feet.py --device cuda:0

MuJoCo collides two boxes with its box-box function; MuJoCo Warp, unless told otherwise, sends them
through its general convex path (GJK/EPA). ``MujocoWarpBackend`` takes the box-box primitive by
default (``convex_box_box=False``). Both backends start from poses in the air with the hips adducted
until the foot boxes overlap (:func:`feet_crossed`), hold them for ``--steps`` policy steps with a
converged solver, and the script prints the largest |CPU - Warp| per field, one row per collider.
``tests/test_warp_parity.py`` asserts the same comparison.
"""

from __future__ import annotations

import argparse

import mujoco
import torch

from isaac_adapter.app.bench.common import format_table
from isaac_adapter.backends.base import PhysicsState
from isaac_adapter.backends.mujoco_cpu import MujocoCpuBackend
from isaac_adapter.backends.mujoco_warp import MujocoWarpBackend
from isaac_adapter.tasks.g1_walk import assets

FIELDS = ("joint_pos", "joint_vel", "applied_torque", "foot_pos_w", "root_ang_vel_w")


def g1_model(converged: bool) -> assets.G1Model:
    """The task's G1 at 5 ms; ``converged``: a solver run to convergence (100 iterations, 50 line
    search steps, tolerance 1e-6) on both backends, so what is left is float32 against float64."""
    model = assets.build_g1_model("menagerie_mjx", 0.005)
    if converged:
        model.model.opt.iterations = 100
        model.model.opt.ls_iterations = 50
        model.model.opt.tolerance = 1e-6
    return model


def max_errors(a: PhysicsState, b: PhysicsState) -> dict[str, float]:
    """Largest |a - b| per field (boolean fields: how many entries differ)."""
    out = {}
    for name, x in a.as_dict().items():
        y = getattr(b, name).to(x.device)
        out[name] = float((x != y).sum()) if x.dtype == torch.bool else float((x - y).abs().max())
    return out


def feet_crossed(joint_names: tuple[str, ...], nominal: torch.Tensor, n: int) -> torch.Tensor:
    """``[n, 7 + J]`` poses in the air, hips adducted until the foot boxes overlap: 3-6 contacts
    between them up to 24 mm deep on the CPU; at the widest, the left shin touches the right foot
    box too. Nothing touches the floor."""
    joints = {name: i for i, name in enumerate(joint_names)}
    qpos = nominal.expand(n, -1).clone()
    qpos[:, 2] = 2.0
    roll = torch.linspace(0.16, 0.19, n)
    qpos[:, 7 + joints["left_hip_roll_joint"]] = -roll
    qpos[:, 7 + joints["right_hip_roll_joint"]] = roll
    return qpos


def foot_box_contacts(model: assets.G1Model, qpos: torch.Tensor) -> list[tuple[int, float]]:
    """Per pose of ``qpos`` ``[n, 7 + J]``: CPU MuJoCo's contacts between the two foot boxes and the
    deepest of them (m), at the start."""
    m = model.model
    data = mujoco.MjData(m)
    feet = {mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, f"{side}_foot_box_collision") for side in ("left", "right")}
    out = []
    for row in qpos.double().numpy():
        data.qpos[:] = row
        mujoco.mj_forward(m, data)
        depths = [-c.dist for c in (data.contact[i] for i in range(data.ncon)) if {c.geom1, c.geom2} == feet]
        out.append((len(depths), max(depths, default=0.0)))
    return out


def feet_parity(convex_box_box: bool, device: str = "cpu", n: int = 4, steps: int = 5,
                decimation: int = 4) -> dict[str, float]:
    """Largest |CPU - Warp| per field over ``steps`` policy steps holding :func:`feet_crossed`,
    converged solver; the feet collided by the convex path or by the box-box primitive."""
    model = g1_model(converged=True)
    nominal = torch.tensor(model.nominal_qpos, dtype=torch.float32)
    qpos, qvel = feet_crossed(model.joint_names, nominal, n), torch.zeros(n, model.model.nv)
    dev, ids = torch.device(device), torch.arange(n)
    cpu = MujocoCpuBackend(model.model, n, decimation, nthread=1, **assets.backend_names())
    warp = MujocoWarpBackend(model.model, n, decimation, device=device, check_every=0,
                             convex_box_box=convex_box_box, **assets.backend_names())
    cpu.reset_envs(ids, qpos, qvel)
    warp.reset_envs(ids.to(dev), qpos.to(dev), qvel.to(dev))
    worst: dict[str, float] = {}
    for _ in range(steps):  # hold the pose: the feet press on each other while the robot falls
        cpu.step(qpos[:, 7:])
        warp.step(qpos[:, 7:].to(dev))
        for name, err in max_errors(cpu.state(), warp.state()).items():
            worst[name] = max(worst.get(name, 0.0), err)
    return worst


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu", help="Warp device: cpu, or cuda:0")
    p.add_argument("--num-envs", type=int, default=4)
    p.add_argument("--steps", type=int, default=5, help="policy steps (4 physics steps of 5 ms each)")
    args = p.parse_args(argv)
    if args.num_envs < 1 or args.steps < 1:
        p.error("--num-envs and --steps must be >= 1")
    import warp as wp

    wp.config.quiet = True
    rows = []
    for convex in (False, True):
        worst = feet_parity(convex, args.device, args.num_envs, args.steps)
        rows.append(["convex path" if convex else "box-box primitive (default)",
                     *(f"{worst[name]:.2g}" for name in FIELDS)])
    model = g1_model(converged=True)
    start = foot_box_contacts(model, feet_crossed(model.joint_names, torch.tensor(model.nominal_qpos), args.num_envs))
    print(f"G1 foot boxes pressed together, {args.num_envs} envs x {args.steps} policy steps, converged solver, "
          f"max |CPU MuJoCo - MuJoCo Warp on {args.device}|")
    print("at the start, per env (CPU MuJoCo): foot-box contacts " + ", ".join(str(c) for c, _ in start)
          + "; deepest (mm) " + ", ".join(f"{1000 * d:.0f}" for _, d in start))
    print(format_table(["feet collided by", *FIELDS], rows))


if __name__ == "__main__":
    main()
