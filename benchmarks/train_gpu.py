"""G1 training throughput on MuJoCo Warp: collection + PPO update through the Runner, env-steps/s.

    python benchmarks/train_gpu.py --num-envs 4096 16384              # one GPU
    torchrun --nproc-per-node 2 benchmarks/train_gpu.py --num-envs 16384   # two GPUs, envs per GPU

Each row: warm-up iterations (kernel compilation, CUDA-graph capture), then the median over timed
iterations of the Runner's own clock (collection, returns and update; ``perf/steps_per_s`` counts
every rank's env steps). The G1 task is the one ``examples/g1_walk.py --backend warp`` trains, with
its default networks (512-256-128) and PPO settings; step validation is off, as a trusted env runs.
Also printed: the exact-bootstrap rows per iteration and the backend's health (overflow, NaN).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from ppo_bootstrap import PolicyConfig, PPOConfig, Runner, RunnerConfig, distributed  # noqa: E402

from isaac_adapter.tasks.g1_walk import G1WalkConfig, G1WalkEnv  # noqa: E402


def measure(num_envs: int, device: torch.device, warmup: int, iterations: int, seed: int) -> dict[str, float]:
    rank = distributed.rank()
    env = G1WalkEnv(G1WalkConfig(num_envs=num_envs, seed=seed + rank, device=str(device)), backend="warp")
    cfg = RunnerConfig(
        num_steps_per_env=24, console=False, validate_env_output=False, seed=seed,
        ppo=PPOConfig(), policy=PolicyConfig(actor_hidden=(512, 256, 128), critic_hidden=(512, 256, 128)),
    )
    runner = Runner(env, cfg, device=device)
    runner.learn(warmup)
    rows = []
    for _ in range(iterations):
        runner.learn(1)
        rows.append(runner.last_stats)
    health = env.backend.check_health() if hasattr(env.backend, "check_health") else {}
    med = lambda key: statistics.median(r[key] for r in rows)  # noqa: E731
    return {
        "steps_per_s": med("perf/steps_per_s"),
        "collect_ms": 1e3 * med("perf/collection_s"),
        "learn_ms": 1e3 * med("perf/learning_s"),
        "ends": med("episodes/ended"),
        "timeouts": med("episodes/truncated_only"),
        "health": health,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-envs", type=int, nargs="+", default=[4096, 16384], help="envs per GPU")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    device = distributed.init_from_env(args.device)
    world = distributed.world_size()
    results = [(n, measure(n, device, args.warmup, args.iterations, args.seed)) for n in args.num_envs]
    if distributed.is_distributed():
        torch.distributed.destroy_process_group()
    if distributed.rank() != 0:
        return
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"torch {torch.__version__} | {world} x {name} | G1 walk on MuJoCo Warp, 24 steps/iteration, "
          f"MLP 512-256-128, 5 epochs x 4 mini-batches; warmup {args.warmup}, median of {args.iterations}")
    print(f"{'GPUs':>4}  {'envs/GPU':>8}  {'env-steps/s':>11}  {'collect ms':>10}  {'learn ms':>8}  "
          f"{'ends/it':>7}  {'timeouts/it':>11}  health")
    for n, r in results:
        print(f"{world:>4}  {n:>8}  {r['steps_per_s']:>11.0f}  {r['collect_ms']:>10.1f}  {r['learn_ms']:>8.1f}  "
              f"{r['ends']:>7.0f}  {r['timeouts']:>11.0f}  {r['health']}")


if __name__ == "__main__":
    main()
