"""A soak: one long CPU training run, and whether what it holds stays flat.

    python benchmarks/soak.py                                   # 10,000 iterations of the G1 CPU task
    python benchmarks/soak.py --hours 2                         # or a wall-clock budget, whichever ends first
    python benchmarks/soak.py --iterations 300 --num-envs 16 --every 25 --json runs/soak.json
    python benchmarks/soak.py --table runs/soak.json            # print a saved curve again

The run trains a registered task (default ``G1-Walk-Clock-CPU-v0`` on CPU MuJoCo) into a run folder
with everything a user's run writes: TensorBoard events, ``metrics.jsonl`` and a checkpoint every
``--save-interval`` iterations. Every ``--every`` iterations it samples the process's resident
memory (RSS), its open file descriptors and threads, the size of the TensorBoard events and of
``metrics.jsonl``, the checkpoints on disk and the iteration time (the median of the last
``--every`` iterations' ``perf/collection_s + perf/learning_s``).

The curve is one row per sample. The verdict compares the last quarter of the samples with the
second quarter (the first is warm-up: allocator pools, the kernel cache): RSS within
``--rss-tolerance`` (default 5 %), open files and threads equal, iteration time within
``--time-tolerance`` (default 15 %). Log files grow by design; their growth per iteration is
printed, and must stay constant (within 10 %). A checkpoint every ``--save-interval`` iterations is
kept (as the application's runs keep them); their count grows by one per save and nothing else.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from isaac_adapter.app.bench.common import format_table

FIELDS = ("iteration", "elapsed_s", "rss_mib", "open_files", "threads", "tensorboard_kib", "metrics_kib",
          "checkpoints", "iteration_s")


def process_sample() -> dict[str, float]:
    """This process's resident memory (MiB), open file descriptors and threads, from ``/proc/self``."""
    status = Path("/proc/self/status").read_text().splitlines()
    fields = dict(line.split(":", 1) for line in status if ":" in line)
    return {"rss_mib": int(fields["VmRSS"].split()[0]) / 1024, "threads": int(fields["Threads"]),
            "open_files": len(os.listdir("/proc/self/fd"))}


def folder_sample(run_dir: Path) -> dict[str, float]:
    """Sizes the run writes: TensorBoard events (KiB), ``metrics.jsonl`` (KiB), checkpoints (count)."""
    events = sum(p.stat().st_size for p in run_dir.rglob("events.out.tfevents.*"))
    metrics = run_dir / "metrics.jsonl"
    return {"tensorboard_kib": events / 1024, "metrics_kib": (metrics.stat().st_size if metrics.exists() else 0) / 1024,
            "checkpoints": len(list(run_dir.glob("model_*.pt")))}


def growth_per_iteration(rows: list[dict[str, float]], key: str) -> list[float]:
    """``key``'s growth per iteration between consecutive samples."""
    return [(b[key] - a[key]) / (b["iteration"] - a["iteration"]) for a, b in zip(rows, rows[1:])
            if b["iteration"] > a["iteration"]]


def verdict(rows: list[dict[str, float]], rss_tolerance: float = 0.05, time_tolerance: float = 0.15) -> list[dict[str, Any]]:
    """One line per quantity: the second quarter's median against the last quarter's, and whether it
    held (module docstring). Needs at least 4 samples."""
    if len(rows) < 4:
        raise ValueError(f"a verdict needs at least 4 samples, got {len(rows)}")
    q = len(rows) // 4
    early, late = rows[q : 2 * q], rows[-q:]

    def med(part: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in part)

    lines = []
    for key, tolerance in (("rss_mib", rss_tolerance), ("iteration_s", time_tolerance)):
        a, b = med(early, key), med(late, key)
        lines.append({"quantity": key, "early": a, "late": b, "held": b <= a * (1 + tolerance),
                      "rule": f"late <= early x {1 + tolerance:g}"})
    for key in ("open_files", "threads"):
        a, b = max(r[key] for r in early), max(r[key] for r in late)
        lines.append({"quantity": key, "early": a, "late": b, "held": b <= a, "rule": "late <= early"})
    for key in ("tensorboard_kib", "metrics_kib"):
        per_it = growth_per_iteration(rows[q:], key)
        if len(per_it) >= 2:
            a, b = statistics.median(per_it[: len(per_it) // 2]), statistics.median(per_it[len(per_it) // 2 :])
            lines.append({"quantity": f"{key} per iteration", "early": a, "late": b, "held": b <= a * 1.10 + 1e-9,
                          "rule": "growth per iteration constant (late <= early x 1.1)"})
    return lines


def format_results(results: dict[str, Any]) -> str:
    rows = results["rows"]
    out = [f"command: {results['command']}", f"machine: {results['machine']}",
           format_table(list(FIELDS), [[_cell(r[k]) for k in FIELDS] for r in rows])]
    if len(rows) >= 4:
        lines = verdict(rows, results["rss_tolerance"], results["time_tolerance"])
        out.append(format_table(["quantity", "2nd quarter", "last quarter", "rule", "result"],
                                [[v["quantity"], _cell(v["early"]), _cell(v["late"]), v["rule"],
                                  "PASS" if v["held"] else "FAIL"] for v in lines]))
        out.append("soak: " + ("PASS" if all(v["held"] for v in lines) else "FAIL"))
    return "\n".join(out)


def _cell(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.3f}"


def soak(a: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    import torch

    from isaac_adapter.app import cli

    run_dir = Path(a.log_dir or tempfile.mkdtemp(prefix="soak_"))
    flags = ["--task", a.task, "--num_envs", str(a.num_envs), "--max_iterations", str(a.every),
             "--save-interval", str(a.save_interval), "--device", "cpu", "--log-dir", str(run_dir),
             "agent.console=off", *a.overrides]
    runner = None
    results: dict[str, Any] = {"command": "python benchmarks/soak.py " + " ".join(argv),
                               "machine": f"{os.cpu_count()} CPUs, torch {torch.__version__}, "
                                          f"python {sys.version.split()[0]}",
                               "rss_tolerance": a.rss_tolerance, "time_tolerance": a.time_tolerance, "rows": []}
    start = time.perf_counter()
    deadline = start + a.hours * 3600 if a.hours else float("inf")
    while (runner is None or runner.iteration < a.iterations) and time.perf_counter() < deadline:
        if runner is None:  # the first stretch is the training script's own run (its export and evaluation too)
            runner = cli.main(["train", *flags])
        else:
            runner.learn(a.every)
        metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()[-a.every:]]
        row = {"iteration": runner.iteration, "elapsed_s": time.perf_counter() - start, **process_sample(),
               **folder_sample(run_dir),
               "iteration_s": statistics.median(m["perf/collection_s"] + m["perf/learning_s"] for m in metrics)}
        results["rows"].append(row)
        print(" ".join(f"{k} {_cell(row[k])}" for k in FIELDS), flush=True)
        if a.json:
            Path(a.json).parent.mkdir(parents=True, exist_ok=True)
            Path(a.json).write_text(json.dumps(results, indent=1))
    return results


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="G1-Walk-Clock-CPU-v0")
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--iterations", type=int, default=10_000)
    p.add_argument("--hours", type=float, default=None, help="wall-clock budget; the run ends at whichever comes first")
    p.add_argument("--every", type=int, default=100, help="iterations between samples")
    p.add_argument("--save-interval", type=int, default=500)
    p.add_argument("--log-dir", default=None, help="the run folder (default: a new temporary folder)")
    p.add_argument("--rss-tolerance", type=float, default=0.05)
    p.add_argument("--time-tolerance", type=float, default=0.15)
    p.add_argument("--json", default=None, help="write the curve here after every sample")
    p.add_argument("--table", default=None, metavar="PATH", help="print a saved curve and its verdict, run nothing")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="env.* / agent.* overrides of the task")
    a = p.parse_intermixed_args(argv)
    for name in ("num_envs", "iterations", "every"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    return a


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    a = parse_args(argv)
    if a.table:
        if not Path(a.table).is_file():
            raise SystemExit(f"error: --table {a.table}: no such file (a --json of an earlier soak)")
        print(format_results(json.loads(Path(a.table).read_text())))
        return 0
    print(format_results(soak(a, argv)))
    return 0
