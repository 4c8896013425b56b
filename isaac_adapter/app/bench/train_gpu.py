"""G1 training throughput on MuJoCo Warp: collection + PPO update through the Runner, env-steps/s.

    python benchmarks/train_gpu.py --num-envs 4096 16384              # one GPU
    torchrun --nproc-per-node 2 benchmarks/train_gpu.py --num-envs 16384   # two GPUs, envs per GPU
    python benchmarks/train_gpu.py --task G1-Walk-Clock-Fast-v2 --num-envs 4096 65536 -- --symmetry both --tf32 --cuda-graph-step
    python benchmarks/train_gpu.py --task G1-Walk-Clock-Fast-v2 --nproc 2 --num-envs 16384   # torchrun, envs per GPU

Without ``--task``: each row builds the G1 task that ``examples/g1_walk.py --backend warp`` trains by
default, with its default networks (512-256-128) and PPO settings, in this process; warm-up
iterations (kernel compilation, CUDA-graph capture), then the median over timed iterations of the
Runner's own clock (collection, returns and update; ``perf/steps_per_s`` counts every rank's env
steps). Step validation is off, as a trusted env runs. Also printed: the exact-bootstrap rows per
iteration and the backend's health (overflow, NaN).

With ``--task ID``: each row is one fresh ``examples/g1_walk.py --task ID`` training process (under
torchrun with ``--nproc`` > 1), so the task's own physics, agent settings and the flags after ``--``
(``--symmetry both --tf32 --cuda-graph-step``: the time-to-walk recipe) are what is timed, end to
end, as a user trains it. The medians are taken over its ``metrics.jsonl`` after the warm-up
iterations, as ``time_to_walk.py`` takes its steady samples/s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

from ppo_bootstrap import PolicyConfig, PPOConfig, Runner, RunnerConfig, distributed

from isaac_adapter.app.bench.common import format_table
from isaac_adapter.app.bench.time_to_walk import _num, load_metrics, read_startup, steady_median, trainer_command, trainer_env
from isaac_adapter.tasks.g1_walk import G1WalkConfig, G1WalkEnv


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


def summarize_task_run(rows: list[dict[str, Any]], warmup: int) -> dict[str, float | None]:
    """One ``--task`` row from a training process's ``metrics.jsonl`` ``rows`` (one per iteration):
    the medians after the first ``warmup`` iterations. ``steps_per_s`` counts every process's env
    steps (the Runner's ``perf/steps_per_s``); the times are the Runner's clock per iteration."""
    med = lambda key, scale=1.0: None if (v := steady_median(rows, warmup, key)) is None else scale * v  # noqa: E731
    return {
        "steps_per_s": med("perf/steps_per_s"),
        "collect_ms": med("perf/collection_s", 1e3),
        "learn_ms": med("perf/learning_s", 1e3),
        "ends": med("episodes/ended"),
        "timed_iterations": max(0, len(rows) - warmup),
    }


def task_args(a: argparse.Namespace, num_envs: int, run_dir: Path, extra: list[str]) -> list[str]:
    """examples/g1_walk.py's arguments for one ``--task`` row: no checkpoint before the last iteration."""
    total = a.warmup + a.iterations
    return ["--task", a.task, "--sim", "warp" if a.sim is None else a.sim, "--device", a.device,
            "--num_envs", str(num_envs), "--max_iterations", str(total), "--save-interval", str(total + 1),
            "--seed", str(a.seed), "--log-dir", str(run_dir), "--no-validate", *extra]


def measure_task(a: argparse.Namespace, num_envs: int, out: Path, extra: list[str]) -> dict[str, Any]:
    run_dir = out / f"envs_{num_envs}"
    run_dir.mkdir(parents=True, exist_ok=True)
    command = trainer_command(sys.executable, a.nproc, task_args(a, num_envs, run_dir, extra))
    log = run_dir / "train.log"
    env = trainer_env("shared", run_dir)  # unbuffered, in the machine's Warp kernel cache
    with open(log, "w") as f:
        code = subprocess.run(command, stdout=f, stderr=subprocess.STDOUT, env=env).returncode
    if code != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
        where = f"log: {log}" if a.out else "--out DIR keeps its log"
        raise SystemExit(f"error: the {num_envs}-env run exited with {code}: {tail[0]} ({where})")
    build_s = (read_startup(log) or {}).get("env")
    return {"num_envs": num_envs, **summarize_task_run(load_metrics(run_dir), a.warmup), "env_build_s": build_s}


def task_report(record: dict[str, Any]) -> str:
    """The header line and table of a ``--task`` record (what ``--json`` writes: ``argv``, ``gpu``,
    ``torch``, ``results``); the command's own settings are read back from its ``argv``."""
    a, extra = parse_args(record["argv"])
    how = " ".join(["examples/g1_walk.py", *extra])
    rows = [[str(a.nproc), f"{r['num_envs']:,}", _num(r["steps_per_s"], ",.0f"), _num(r["collect_ms"], ".1f"),
             _num(r["learn_ms"], ".1f"), _num(r["ends"], ".0f"), _num(r["env_build_s"], ".1f")]
            for r in record["results"]]
    headers = ["GPUs", "envs/GPU", "env-steps/s", "collect ms", "learn ms", "ends/it", "env build s"]
    return (f"torch {record['torch']} | {a.nproc} x {record['gpu']} | {a.task} through {how}; "
            f"warmup {a.warmup}, median of {a.iterations}\n" + format_table(headers, rows, left=0))


def run_tasks(a: argparse.Namespace, extra: list[str], argv: list[str]) -> None:
    name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    record: dict[str, Any] = {"argv": argv, "gpu": name, "torch": torch.__version__, "results": []}
    with tempfile.TemporaryDirectory(prefix="train_gpu_") as tmp:
        out = Path(a.out) if a.out else Path(tmp)
        try:
            for n in a.num_envs:
                record["results"].append(measure_task(a, n, out, extra))
                if a.json:  # after every row, so that a failed or stopped larger row keeps the rows before it
                    Path(a.json).write_text(json.dumps(record, indent=1))
        finally:
            if record["results"]:
                print(task_report(record), flush=True)


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    own, extra = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("--num-envs", type=int, nargs="+", default=[4096, 16384], help="envs per GPU")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--task", default=None,
                        help="train this registered task through examples/g1_walk.py, one process per row; flags "
                        "after -- go to g1_walk.py")
    parser.add_argument("--nproc", type=int, default=1, help="--task: processes (GPUs) per row, through torchrun")
    parser.add_argument("--sim", default=None, help="--task: g1_walk.py --sim (default warp)")
    parser.add_argument("--out", default=None, help="--task: keep the run folders here (default: a temporary folder)")
    parser.add_argument("--json", default=None, help="--task: also write the rows to this JSON file")
    parser.add_argument("--table", metavar="JSON", nargs="+", default=None,
                        help="re-print the tables of --json files; runs nothing")
    a = parser.parse_args(own)
    if a.task is None and (extra or a.nproc != 1 or a.sim or a.out or a.json):
        parser.error("flags after --, --nproc, --sim, --out and --json are for --task runs")
    if a.nproc < 1 or a.iterations < 1 or a.warmup < 0 or min(a.num_envs) < 1:
        parser.error("--nproc, --iterations and --num-envs must be >= 1, --warmup >= 0")
    return a, extra


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args, extra = parse_args(argv)
    if args.table:
        print("\n\n".join(task_report(json.loads(Path(path).read_text())) for path in args.table))
        return
    if args.task is not None:
        run_tasks(args, extra, argv)
        return
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
