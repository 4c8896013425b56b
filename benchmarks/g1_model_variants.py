"""Which G1 model the embedded CPU backend should use: survival and speed of each variant.

For every variant, at sim_dt 0.005 s and decimation 4 (50 Hz policy), with the task's training fall
rules (height < 0.25 m; tilt_xy > 0.8 after 0.4 s; |v_y body| > 1.15 m/s after 0.7 s):

* hold: targets fixed at the nominal pose (what a zero-mean policy does at initialisation);
* noise: nominal + 0.25 rad * N(0, 1) per step (an untrained Gaussian policy);
* stability: the playground file's own Euler integrator vs implicitfast at 5 ms under 1.0 rad noise;
* cost: microseconds per physics substep of one ``MjData`` on one thread, under the same noise with
  resets after falls (single-threaded, so it is not blurred by other load on a shared machine).

Run: ``python benchmarks/g1_model_variants.py``
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import mujoco  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from isaac_adapter.backends.mujoco_cpu import MujocoCpuBackend  # noqa: E402
from isaac_adapter.tasks.g1_walk import G1WalkConfig, assets, terms  # noqa: E402
from isaac_adapter.tasks.g1_walk.causes import SIGNAL_CAUSES  # noqa: E402

DT, DECIMATION, SECONDS = 0.005, 4, 4.0


def make(variant: str, num_envs: int, integrator: str | None = None) -> tuple[MujocoCpuBackend, torch.Tensor]:
    g1 = assets.build_g1_model(variant, DT)
    if integrator is not None:  # the batch copies the model, so change it before
        g1.model.opt.integrator = getattr(mujoco.mjtIntegrator, f"mjINT_{integrator.upper()}")
    backend = MujocoCpuBackend(g1.model, num_envs, DECIMATION, **assets.backend_names())
    nominal = torch.tensor(g1.nominal_qpos, dtype=torch.float32)
    ids = torch.arange(num_envs)
    backend.reset_envs(ids, nominal.expand(num_envs, -1), torch.zeros(num_envs, 6 + backend.num_joints))
    return backend, nominal


def survival(variant: str, noise: float, num_envs: int = 16) -> dict[str, float]:
    backend, nominal = make(variant, num_envs)
    gen = torch.Generator().manual_seed(0)
    cfg = G1WalkConfig(sim_dt=DT, decimation=DECIMATION)  # the training fall rules
    policy_dt = cfg.policy_dt
    first_checked = terms.first_checked_steps(cfg.tilt_grace_s, cfg.lateral_grace_s, policy_dt)
    fall_step = torch.full((num_envs,), -1)
    cause = torch.zeros(num_envs, dtype=torch.long)
    never_timed_out = torch.zeros(num_envs, dtype=torch.bool)
    height_1s = 0.0
    for step in range(1, int(SECONDS / policy_dt) + 1):
        target = nominal[7:] + noise * torch.randn(num_envs, backend.num_joints, generator=gen)
        backend.step(target)
        s = backend.state()
        raw = terms.fall_signals(
            s.root_pos_w[:, 2], terms.tilt_xy(terms.projected_gravity(s.root_quat_w)),
            terms.to_body(s.root_quat_w, s.root_lin_vel_w),
            cfg.train_collapse_height, cfg.tilt_threshold, cfg.lateral_vel_threshold,
        )
        active = terms.active_falls(raw, torch.full((num_envs,), step), first_checked)
        new = active.any(-1) & (fall_step < 0)
        cause[new] = terms.exclusive_cause(active, never_timed_out)[new]
        fall_step[new] = step
        if step == round(1.0 / policy_dt):
            height_1s = s.root_pos_w[:, 2].mean().item()
    fell = fall_step > 0
    t = fall_step[fell].float() * policy_dt
    return {
        "fell": int(fell.sum()),
        "first_fall_s": t.min().item() if fell.any() else float("nan"),
        "mean_fall_s": t.mean().item() if fell.any() else float("nan"),
        "causes h/t/l": "/".join(str(int((cause[fell] == c).sum())) for c in SIGNAL_CAUSES),
        "height_1s": height_1s,
    }


def max_joint_speed(variant: str, integrator: str | None, noise: float = 1.0, num_envs: int = 16) -> float:
    """Largest |joint velocity| (rad/s) over 2 s of violent random targets: a divergence check."""
    backend, nominal = make(variant, num_envs, integrator)
    gen = torch.Generator().manual_seed(0)
    fastest = 0.0
    for _ in range(100):
        backend.step(nominal[7:] + noise * torch.randn(num_envs, backend.num_joints, generator=gen))
        fastest = max(fastest, backend.state().joint_vel.abs().max().item())
    return fastest


def substep_cost_us(variant: str, substeps: int = 4000) -> float:
    g1 = assets.build_g1_model(variant, DT)
    model, data = g1.model, mujoco.MjData(g1.model)
    key = model.key(assets.VARIANTS[variant].keyframe).id
    mujoco.mj_resetDataKeyframe(model, data, key)
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    for i in range(substeps):
        if i % DECIMATION == 0:
            data.ctrl[:] = g1.nominal_qpos[7:] + 0.25 * rng.standard_normal(model.nu)
        mujoco.mj_step(model, data)
        if data.qpos[2] < 0.25:
            mujoco.mj_resetDataKeyframe(model, data, key)
    return (time.perf_counter() - start) / substeps * 1e6


if __name__ == "__main__":
    print(f"{'variant':<20} {'mode':<6} {'fell/16':>7} {'first s':>8} {'mean s':>7} {'h/t/l':>8} {'z@1s':>6}")
    for variant in assets.VARIANTS:
        for mode, noise in (("hold", 0.0), ("noise", 0.25)):
            r = survival(variant, noise)
            print(f"{variant:<20} {mode:<6} {r['fell']:>7} {r['first_fall_s']:>8.2f} {r['mean_fall_s']:>7.2f} "
                  f"{r['causes h/t/l']:>8} {r['height_1s']:>6.3f}")
        print(f"{variant:<20} cost   {substep_cost_us(variant):>7.1f} us per physics substep (1 thread)")
    # the playground file ships Euler (eulerdamp off) tuned for a 2 ms step; the variant overrides it
    checks = (("playground_feetonly", "euler"), ("playground_feetonly", None), ("menagerie_mjx", None))
    for variant, integrator in checks:
        speed = max_joint_speed(variant, integrator)
        name = integrator or "as used"
        print(f"{variant:<20} {name:<12} max |joint vel| under 1.0 rad noise: {speed:.3g} rad/s")
