"""Env-steps/s of the G1 walk task on the embedded CPU MuJoCo backend, with the policy in the loop.

Each step is what the Runner's rollout does per step on CPU: the actor (MLP 512-256-128, ELU)
samples actions from the policy observation, the critic (same shape) evaluates the privileged
observation, and the env advances one 20 ms policy step (4 x 5 ms physics substeps on all cores),
including selective resets. The actor is untrained, so robots fall after about 1.1 s and get reset:
the regime of early training, and the slower one (a fall costs more contacts than standing).
"physics" is the backend's ``step`` alone with the same actions, for reference.

    python benchmarks/env_cpu.py                       # 16, 32, 64, 128 envs
    python benchmarks/env_cpu.py --num-envs 64 --steps 500
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from ppo_bootstrap.env import critic_obs  # noqa: E402
from ppo_bootstrap.modules import ActorCritic, PolicyConfig  # noqa: E402

from isaac_adapter.tasks.g1_walk import G1WalkConfig, G1WalkEnv  # noqa: E402
from isaac_adapter.tasks.g1_walk.assets import VARIANTS  # noqa: E402


def measure(num_envs: int, steps: int, warmup: int, variant: str, physics_threads: int = 0) -> tuple[float, float]:
    """Returns ``(env + policy steps/s, physics-only steps/s)``."""
    env = G1WalkEnv(G1WalkConfig(num_envs=num_envs, seed=0, model_variant=variant, physics_threads=physics_threads))
    obs = env.reset()
    policy = ActorCritic(
        obs["policy"].shape[-1], obs["critic"].shape[-1], env.num_actions,
        PolicyConfig(actor_hidden=(512, 256, 128), critic_hidden=(512, 256, 128)),
    ).eval()
    physics_s = 0.0
    step_fn = env.backend.step

    def timed_step(targets: torch.Tensor) -> None:
        nonlocal physics_s
        start = time.perf_counter()
        step_fn(targets)
        physics_s += time.perf_counter() - start

    env.backend.step = timed_step  # type: ignore[method-assign]
    with torch.inference_mode():
        for i in range(warmup + steps):
            if i == warmup:
                physics_s, start = 0.0, time.perf_counter()
            dist, _ = policy.act(obs["policy"], None)
            policy.value(critic_obs(obs), None)
            obs = env.step(dist.sample()).obs
    total_s = time.perf_counter() - start
    return num_envs * steps / total_s, num_envs * steps / physics_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-envs", type=int, nargs="+", default=[16, 32, 64, 128])
    parser.add_argument("--steps", type=int, default=250, help="policy steps measured (after warm-up)")
    parser.add_argument("--warmup", type=int, default=25)
    parser.add_argument("--repeats", type=int, default=3, help="runs per row; the table shows the best and the median")
    parser.add_argument("--model-variant", choices=sorted(VARIANTS), default=G1WalkConfig.model_variant)
    # physics owns the cores; one torch thread measured faster (4.7k vs 4.0k steps/s at 64 envs)
    parser.add_argument("--torch-threads", type=int, default=1)
    parser.add_argument("--physics-threads", type=int, default=0, help="MuJoCo batch threads, 0 for all cores")
    args = parser.parse_args()
    torch.set_num_threads(args.torch_threads)

    import mujoco

    print(
        f"G1 walk, MuJoCo {mujoco.__version__} CPU ({args.model_variant}), {os.cpu_count()} cores, "
        f"torch {torch.__version__} ({torch.get_num_threads()} threads), {platform.processor() or platform.machine()}"
    )
    print(
        f"{args.steps} policy steps of 20 ms per run, best and median of {args.repeats} runs; "
        f"actor+critic MLP 512-256-128 in the loop; load average before: {os.getloadavg()[0]:.2f}\n"
    )
    header = f"{'num envs':>8}  {'env+policy steps/s (best / median)':>34}  {'physics steps/s (best / median)':>31}"
    print(header)
    print("-" * len(header))
    for n in args.num_envs:
        runs = [
            measure(n, args.steps, args.warmup, args.model_variant, args.physics_threads) for _ in range(args.repeats)
        ]
        total = sorted(r[0] for r in runs)
        physics = sorted(r[1] for r in runs)
        mid = len(runs) // 2
        print(
            f"{n:>8}  {f'{total[-1]:,.0f} / {total[mid]:,.0f}':>34}  {f'{physics[-1]:,.0f} / {physics[mid]:,.0f}':>31}",
            flush=True,
        )
    # a shared machine slows every number; the load average says how much else was running
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
