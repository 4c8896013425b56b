"""Env-steps/s of the G1 walk task on MuJoCo Warp (GPU), with the policy in the loop.

Each step is what the Runner's rollout does per step: the actor (MLP 512-256-128, ELU) samples
actions from the policy observation, the critic (same shape) evaluates the privileged observation,
and the env advances one 20 ms policy step (4 x 5 ms physics substeps in one CUDA graph launch),
including selective resets. ``--runner`` adds the rate of the Runner's own rollout on the same env
(``Runner._collect``: actions with log-probabilities, values, storage writes, episode sums; the
trainer's collection without the update), so the two rows say what the trainer adds per step. The actor is untrained, so robots fall within about a second and get
reset: the regime of early training. "physics" is the backend's ``step`` alone (graph launch plus
health accumulation) with fixed targets, for reference.

For every size the run ends with the backend's health check: no buffer overflow (contacts,
constraint rows, ...) and no non-finite state in any env, else the row says FAIL. It also reports
buffer headroom (peak constraint rows per world vs ``njmax``, peak contacts vs ``naconmax``), the
share of env-steps whose 5-iteration Newton solve stopped at its cap (the model's setting; MuJoCo
on CPU stops there too), and checks on the device that a selective reset leaves every other env
bit-identical.

    python benchmarks/env_gpu.py                        # 1024, 4096, 16384 envs on cuda:0
    python benchmarks/env_gpu.py --num-envs 4096 --steps 500
    python benchmarks/env_gpu.py --num-envs 16384 --physics dt=0.005,dec=4 dt=0.005,dec=4,it=3,ls=4 dt=0.004,dec=5
    python benchmarks/env_gpu.py --num-envs 4096 65536 --physics dt=0.01,dec=2 dt=0.01,dec=2,solver=cg,it=20
    python benchmarks/env_gpu.py --num-envs 16384 --njmax 0 128                 # constraint rows per world
    python benchmarks/env_gpu.py --num-envs 4096 --nconmax 0 16 --njmax 0 128   # contacts per world, pooled
    python benchmarks/env_gpu.py --num-envs 4096 --sensor-substeps last every   # sensors on every substep too
    python benchmarks/env_gpu.py --num-envs 4096 16384 --breakdown             # policy / physics / task ms per step
    python benchmarks/env_gpu.py --num-envs 4096 --runner                      # the Runner's rollout on the same env
    python benchmarks/env_gpu.py --num-envs 4096 16384 --graph-step off on --runner   # the env step in one CUDA graph

``--physics`` takes the settings of ``benchmarks/physics_settings.py`` (which measures on CPU what
each does to the dynamics and to the gate; ``sensors=file`` keeps the model file's IMU sensors);
one row per setting, ``--njmax``, ``--nconmax`` and size. ``--nconmax`` sizes the contact buffer
(per world, pooled over the worlds, so it bounds the total; 0: the backend's bound, 102). ``--njmax``
sizes the per-world constraint-row buffers (0: the backend's bound, every contact and limit active
at once, 292 rows for the G1, where about 85 are used); a row whose envs asked for more fails its
health check instead of dropping constraints.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from ppo_bootstrap import Runner, RunnerConfig  # noqa: E402
from ppo_bootstrap.env import critic_obs  # noqa: E402
from ppo_bootstrap.episode import done_mask  # noqa: E402
from ppo_bootstrap.modules import ActorCritic, PolicyConfig  # noqa: E402

try:
    from isaac_adapter.backends.mujoco_warp import SimulationHealthError  # noqa: E402
except ModuleNotFoundError as err:  # one line, not a traceback
    raise SystemExit(f"error: benchmarks/env_gpu.py needs MuJoCo Warp ({err}): pip install -e '.[warp]'") from None
from isaac_adapter.tasks.g1_walk import G1WalkConfig, G1WalkEnv  # noqa: E402
from isaac_adapter.tasks.g1_walk.assets import VARIANTS  # noqa: E402
from isaac_adapter.tasks.g1_walk.env import make_warp_backend  # noqa: E402

from isaac_adapter.app.bench.physics_settings import Setting, parse_setting  # noqa: E402


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def reset_is_selective(env: G1WalkEnv) -> bool:
    """Reset every 3rd env on the device; every other env's state must stay bit-identical."""
    backend = env.backend
    before = backend.state()
    ids = torch.arange(0, env.num_envs, 3, device=env.device)
    qpos = env.nominal_qpos.expand(ids.numel(), -1).clone()
    qvel = torch.zeros(ids.numel(), 6 + env.num_actions, device=env.device)
    backend.reset_envs(ids, qpos, qvel)
    after = backend.state()
    keep = torch.ones(env.num_envs, dtype=torch.bool, device=env.device)
    keep[ids] = False
    same = all(torch.equal(getattr(before, k)[keep], getattr(after, k)[keep]) for k in before.as_dict())
    reset_ok = torch.allclose(after.joint_pos[ids], qpos[:, 7:], atol=1e-6)
    return same and reset_ok


def rollout_actions(policy: ActorCritic, obs: dict) -> torch.Tensor:
    """What the Runner's rollout computes per step before the env step: sampled actions ``[N, J]``
    from the actor, and the critic's value (computed and dropped, for its cost)."""
    dist, _ = policy.act(obs["policy"], None)
    policy.value(critic_obs(obs), None)
    return dist.sample()


def step_breakdown(env: G1WalkEnv, policy: ActorCritic, obs: dict, steps: int) -> dict:
    """Milliseconds per policy step in each phase, the device synchronized around each: the actor
    and critic (``policy_ms``), the backend's physics step (``physics_ms``) and the rest of the env
    step, task terms, observations and resets (``task_ms``). Synchronizing takes the overlap of host
    and device away, so the sum exceeds the pipelined step; it says which phase to make cheaper."""
    dev, backend = env.device, env.backend
    spent = {"policy": 0.0, "physics": 0.0, "env": 0.0}
    physics_step = backend.step

    def timed_physics(targets: torch.Tensor) -> None:
        sync(dev)
        t = time.perf_counter()
        physics_step(targets)
        sync(dev)
        spent["physics"] += time.perf_counter() - t

    backend.step = timed_physics  # the env calls its backend's step: time it there
    try:
        for _ in range(steps):
            sync(dev)
            t = time.perf_counter()
            actions = rollout_actions(policy, obs)
            sync(dev)
            spent["policy"] += time.perf_counter() - t
            t = time.perf_counter()
            obs = env.step(actions).obs
            sync(dev)
            spent["env"] += time.perf_counter() - t
    finally:
        del backend.step  # back to the class's method
    ms = {k: v / steps * 1e3 for k, v in spent.items()}
    return {"policy_ms": ms["policy"], "physics_ms": ms["physics"], "task_ms": ms["env"] - ms["physics"]}


def runner_rate(env: G1WalkEnv, steps: int) -> float:
    """Env-steps/s of the Runner's rollouts (24 steps each, as training collects them; at least one
    rollout timed after one warm-up rollout) on ``env``, pipelined: one synchronisation at each end."""
    cfg = RunnerConfig(num_steps_per_env=24, save_interval=0, log_dir=None, validate_env_output=False, console=False)
    runner = Runner(env, cfg, env.device)
    runner._collect()
    rollouts = max(1, steps // cfg.num_steps_per_env)
    sync(env.device)
    start = time.perf_counter()
    for _ in range(rollouts):
        runner._collect()
    sync(env.device)
    return env.num_envs * cfg.num_steps_per_env * rollouts / (time.perf_counter() - start)


def measure(num_envs: int, steps: int, warmup: int, variant: str, device: str, check_every: int,
            physics: Setting, njmax: int = 0, breakdown: bool = False, nconmax: int = 0,
            sensor_substeps: str = "last", runner: bool = False, graph_step: bool = False) -> dict:
    t0 = time.perf_counter()
    cfg = G1WalkConfig(num_envs=num_envs, seed=0, model_variant=variant, device=device, **physics.config_overrides())
    backend, nominal, names = make_warp_backend(cfg, check_every=check_every, njmax=njmax or None,
                                                nconmax=nconmax or None,
                                                sensors_every_substep=sensor_substeps == "every")
    env = G1WalkEnv(cfg, backend=backend, nominal_qpos=nominal, joint_names=names)
    env.validate_actions = False  # as training with --no-validate: no per-step host sync for the finiteness check
    env.cuda_graph = graph_step  # the whole env step recorded once and replayed (its first step records)
    dev = env.device
    obs = env.reset()
    policy = ActorCritic(
        obs["policy"].shape[-1], obs["critic"].shape[-1], env.num_actions,
        PolicyConfig(actor_hidden=(512, 256, 128), critic_hidden=(512, 256, 128)),
    ).to(dev).eval()
    label = physics.label() + (f", njmax {njmax}" if njmax else "") + (f", nconmax {nconmax}" if nconmax else "")
    label += ", sensors every substep" if sensor_substeps == "every" else ""
    label += ", env step in a CUDA graph" if graph_step else ""
    row: dict = {"setting": label, "num_envs": num_envs, "njmax": backend.njmax, "nconmax": backend.nconmax}
    ends = 0
    try:
        with torch.inference_mode():
            for i in range(warmup + steps):
                if i == warmup:
                    sync(dev)
                    backend.check_health()
                    backend.health_summary(reset=True)
                    row["setup_s"] = time.perf_counter() - t0
                    start, ends = time.perf_counter(), 0
                result = env.step(rollout_actions(policy, obs))
                obs = result.obs
                ends += done_mask(result.terminated, result.truncated).sum()  # a device tensor: no sync per step
            sync(dev)
            total_s = time.perf_counter() - start
            backend.check_health()
            health = backend.health_summary()
            if breakdown:
                row.update(step_breakdown(env, policy, obs, steps))

            targets = env.nominal_joint_pos.expand(num_envs, -1).contiguous()
            sync(dev)
            start = time.perf_counter()
            for _ in range(steps):
                backend.step(targets)
            sync(dev)
            physics_s = time.perf_counter() - start
            backend.check_health()
            row["selective_reset"] = reset_is_selective(env)
        if runner:  # in inference mode too: the env's buffers were made there
            with torch.inference_mode():
                row["runner"] = runner_rate(env, steps)
            backend.check_health()
        row.update(
            env_policy=num_envs * steps / total_s,
            physics=num_envs * steps / physics_s,
            ends_per_step=float(ends) / steps,
            iter_cap=health["iteration_cap_frac"],
            peak_nefc=int(health["peak_nefc"]),
            peak_nacon=int(health["peak_nacon"]),
            naconmax=int(health["naconmax"]),
            health="ok",
        )
    except SimulationHealthError as err:
        row["health"] = f"FAIL: {err}"
    if dev.type == "cuda":
        row["gpu_mem_gib"] = torch.cuda.max_memory_allocated(dev) / 2**30
    del env, backend, policy, obs
    gc.collect()
    if dev.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(dev)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-envs", type=int, nargs="+", default=[1024, 4096, 16384])
    parser.add_argument("--steps", type=int, default=200, help="policy steps measured (after warm-up)")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--check-every", type=int, default=50, help="policy steps between health checks")
    parser.add_argument("--model-variant", choices=sorted(VARIANTS), default=G1WalkConfig.model_variant)
    parser.add_argument("--physics", nargs="+", default=["dt=0.005,dec=4"],
                        help="physics settings, as benchmarks/physics_settings.py reads them "
                        "(dt=,dec=[,solver=][,it=][,ls=])")
    parser.add_argument("--njmax", type=int, nargs="+", default=[0],
                        help="constraint rows per world (0: the backend's bound); one row per value")
    parser.add_argument("--nconmax", type=int, nargs="+", default=[0],
                        help="contacts per world, pooled over the worlds (0: the backend's bound); one row per value")
    parser.add_argument("--graph-step", nargs="+", choices=("off", "on"), default=["off"],
                        help="record the whole env step (task and physics) in one CUDA graph: env.cuda_graph")
    parser.add_argument("--sensor-substeps", nargs="+", choices=("last", "every"), default=["last"],
                        help="compute the sensors on a step's last substep (the backend's default) or on every one")
    parser.add_argument("--breakdown", action="store_true",
                        help="also time the policy, physics and task phases of a step, each synchronized")
    parser.add_argument("--runner", action="store_true",
                        help="also time the Runner's rollout collection on the same env (env-steps/s)")
    args = parser.parse_args()
    if "on" in args.graph_step and not args.device.startswith("cuda"):
        parser.error(f"--graph-step on records the env step in a CUDA graph; --device {args.device} is not a GPU")
    for flag, values in (("--njmax", args.njmax), ("--nconmax", args.nconmax)):
        if any(n < 0 for n in values):
            parser.error(f"{flag} must be >= 0 (0: the backend's bound), got {values}")
    try:
        settings = [parse_setting(text) for text in args.physics]
    except ValueError as err:
        parser.error(f"--physics {err}")

    import mujoco
    import mujoco_warp
    import warp as wp

    wp.config.quiet = True
    name = torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else "CPU"
    print(
        f"G1 walk on MuJoCo Warp {getattr(mujoco_warp, '__version__', '?')} (warp {wp.__version__}, "
        f"mujoco {mujoco.__version__}, {args.model_variant}), {name}, torch {torch.__version__}"
    )
    print(f"{args.steps} policy steps of 20 ms per row; actor+critic MLP 512-256-128 in the loop\n", flush=True)
    rows = []
    for setting in settings:
        for njmax in args.njmax:
            for nconmax in args.nconmax:
                for sensor_substeps in args.sensor_substeps:
                    for graph_step in args.graph_step:
                        for n in args.num_envs:
                            rows.append(measure(n, args.steps, args.warmup, args.model_variant, args.device,
                                                args.check_every, setting, njmax, args.breakdown, nconmax,
                                                sensor_substeps, args.runner, graph_step == "on"))
                            print(rows[-1], flush=True)

    print()
    header = (
        f"{'physics setting':<42}  {'num envs':>8}  {'env+policy steps/s':>18}  {'runner steps/s':>14}  "
        f"{'physics steps/s':>15}  {'ends/step':>9}  "
        f"{'iter cap':>8}  {'peak nefc/njmax':>15}  {'peak nacon/naconmax':>19}  {'torch GiB':>9}  "
        f"{'reset ok':>8}  health"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        if r["health"] != "ok":
            print(f"{r['setting']:<42}  {r['num_envs']:>8}  {r['health']}")
            continue
        print(
            f"{r['setting']:<42}  {r['num_envs']:>8}  {r['env_policy']:>18,.0f}  "
            f"{format(r['runner'], ',.0f') if 'runner' in r else '-':>14}  {r['physics']:>15,.0f}  {r['ends_per_step']:>9.1f}  "
            f"{r['iter_cap']:>8.1%}  {r['peak_nefc']:>7}/{r['njmax']:<7}  {r['peak_nacon']:>9}/{r['naconmax']:<9}  "
            f"{r.get('gpu_mem_gib', 0):>9.2f}  {str(r['selective_reset']):>8}  {r['health']}"
        )
    timed = [r for r in rows if "policy_ms" in r]
    if timed:
        print("\nwhere a step's time goes, ms per policy step, the device synchronized around each phase:")
        header = f"{'physics setting':<42}  {'num envs':>8}  {'policy':>7}  {'physics':>7}  {'task':>7}  {'sum':>7}"
        print(header)
        print("-" * len(header))
        for r in timed:
            total = r["policy_ms"] + r["physics_ms"] + r["task_ms"]
            print(f"{r['setting']:<42}  {r['num_envs']:>8}  {r['policy_ms']:>7.2f}  {r['physics_ms']:>7.2f}  "
                  f"{r['task_ms']:>7.2f}  {total:>7.2f}")


if __name__ == "__main__":
    main()
