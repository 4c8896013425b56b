"""Training speed beside CPU load: how much do the gate's judges slow the trainer, and what avoids it?

    python benchmarks/train_under_load.py -- --task G1-Walk-Clock-Fast-v1 --symmetry both --tf32 --cuda-graph-step
    python benchmarks/train_under_load.py --rows alone judges --workers 4 --iterations 40
    python benchmarks/train_under_load.py --sim mujoco --device cpu --num-envs 64 --rows alone   # a CPU try-out

Each row launches a fresh ``examples/g1_walk.py`` (the flags after ``--`` are its own) and times its
first ``--iterations`` iterations by the Runner's clock (the medians after ``--warmup``), while a
load runs on the CPU:

* ``alone``: nothing else.
* ``judges``: ``--workers`` gate processes (what ``time_to_walk.py`` runs beside a trainer:
  ``--judge-threads`` torch and MuJoCo threads each, ``--judge-nice`` lower priority) judging
  ``--checkpoint`` over and over.
* ``judges-pinned``: the same, on the CPUs from ``--trainer-cpus`` on; the trainer on the CPUs below.
* ``judges-omp1``: the same load, the trainer with one torch CPU thread (``OMP_NUM_THREADS=1``).

The load is busy before the trainer starts. Prints the CPU facts that decide how processes share
the machine (CPUs seen and usable, threads per core, the cgroup's CPU quota) and one line per row:
collection and learning time per iteration, samples/s, and samples/s against ``alone``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common  # noqa: F401  (puts the repository root on sys.path)
from _common import format_table

import time_to_walk as ttw

ROWS = ("alone", "judges", "judges-pinned", "judges-omp1")
DEFAULT_CHECKPOINT = ttw.REPO / "docs" / "checkpoints" / "g1_ttw_v1_s2_it360.pt"


def cgroup_cpu_quota(root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """CPUs' worth of time the cgroup may use (cgroup v2 ``cpu.max``, else v1 ``cpu.cfs_quota_us``);
    None when unlimited or unknown. Over quota, every process of the group waits for the next period,
    whatever its priority."""
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota_us = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period_us = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        return None if quota_us < 0 else quota_us / period_us
    except (OSError, ValueError):
        return None


def threads_per_core(cpu: Path = Path("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list")) -> int | None:
    """Hardware threads sharing CPU 0's core (``0-1`` or ``0,64``: 2), None when unknown."""
    try:
        text = cpu.read_text().strip()
    except OSError:
        return None
    count = 0
    for part in text.split(","):
        low, _, high = part.partition("-")
        count += int(high or low) - int(low) + 1
    return count


def cpu_facts() -> dict[str, Any]:
    return {"cpu_count": os.cpu_count(), "usable_cpus": len(os.sched_getaffinity(0)),
            "threads_per_core": threads_per_core(), "cgroup_cpu_quota": cgroup_cpu_quota()}


def split_cpus(usable: list[int], trainer_cpus: int) -> tuple[list[int], list[int]]:
    """The trainer's CPUs (the first ``trainer_cpus`` usable ones) and the load's (the rest)."""
    if not 0 < trainer_cpus < len(usable):
        raise ValueError(f"--trainer-cpus {trainer_cpus}: pinning needs 1 to {len(usable) - 1} of the "
                         f"{len(usable)} usable CPUs for the trainer, the rest for the judges")
    return usable[:trainer_cpus], usable[trainer_cpus:]


def _judge_forever(path: str, gate: dict[str, Any], threads: int, nice: int, cpus: list[int] | None,
                   started: Any) -> None:
    """A gate process that judges ``path`` until it is terminated (the load of one judge)."""
    if cpus:
        os.sched_setaffinity(0, cpus)
    ttw._judge_init(threads, nice)
    from isaac_adapter.evaluation.gate import GateConfig, gate_checkpoint

    started.release()
    while True:
        gate_checkpoint(path, GateConfig(**gate), physics_threads=threads)


class Load:
    """``workers`` judges, started (and busy) on entry, terminated on exit."""

    def __init__(self, workers: int, checkpoint: str, gate: dict[str, Any], threads: int, nice: int,
                 cpus: list[int] | None) -> None:
        self.args = (checkpoint, gate, threads, nice, cpus)
        self.workers = workers
        self.procs: list[multiprocessing.Process] = []

    def __enter__(self) -> "Load":
        ctx = multiprocessing.get_context("spawn")  # a fresh interpreter, as time_to_walk's judges
        started = ctx.Semaphore(0)
        self.procs = [ctx.Process(target=_judge_forever, args=(*self.args, started), daemon=True)
                      for _ in range(self.workers)]
        for proc in self.procs:
            proc.start()
        for _ in self.procs:  # every judge past its imports, into the gate
            if not started.acquire(timeout=300):
                raise SystemExit("error: a judge did not start within 300 s (see its output above)")
        return self

    def __exit__(self, *exc: Any) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            proc.join(30)


def row_summary(metrics: list[dict[str, Any]], warmup: int) -> dict[str, float | None]:
    """Medians after ``warmup`` iterations (``time_to_walk.steady_median``): collection and learning
    seconds, samples/s."""
    return {"collection_s": ttw.steady_median(metrics, warmup, "perf/collection_s"),
            "learning_s": ttw.steady_median(metrics, warmup, "perf/learning_s"),
            "steps_per_s": ttw.steady_median(metrics, warmup), "iterations": max(len(metrics) - warmup, 0)}


def train_row(a: argparse.Namespace, extra: list[str], run_dir: Path, cpus: list[int] | None,
              env_extra: dict[str, str]) -> dict[str, Any]:
    """One fresh trainer for ``a.iterations`` iterations (then SIGTERM); its medians."""
    args = ["--sim", a.sim, "--device", a.device, "--num_envs", str(a.num_envs), "--max_iterations", "100000",
            "--seed", str(a.seed), "--save-interval", "0", "--log-dir", str(run_dir), "--no-validate", *extra]
    command = ttw.trainer_command(sys.executable, 1, args)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **env_extra}
    own = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus or own)  # the trainer and every thread it starts inherit it
    try:
        trainer = ttw.Trainer(command, run_dir / "train.log", env)
    finally:
        os.sched_setaffinity(0, own)
    try:
        while len(ttw.load_metrics(run_dir)) < a.iterations:
            if trainer.poll() is not None:
                raise SystemExit(f"error: examples/g1_walk.py exited with status {trainer.poll()}; last lines of "
                                 f"{trainer.log}:\n{ttw.log_tail(trainer.log)}")
            time.sleep(0.5)
    finally:
        trainer.stop(a.stop_timeout_s)
    return row_summary(ttw.load_metrics(run_dir)[: a.iterations], a.warmup)


def run(a: argparse.Namespace, extra: list[str]) -> list[dict[str, Any]]:
    usable, pinned = sorted(os.sched_getaffinity(0)), a.pinned
    gate = ttw.gate_settings(a)
    results = []
    with tempfile.TemporaryDirectory(prefix="train_under_load_") as tmp:
        for name in a.rows:
            run_dir = Path(tmp) / name
            run_dir.mkdir()
            trainer_cpus = pinned[0] if name == "judges-pinned" else None
            env_extra = {"OMP_NUM_THREADS": "1"} if name == "judges-omp1" else {}
            if name == "alone":
                summary = train_row(a, extra, run_dir, None, env_extra)
            else:
                load_cpus = pinned[1] if name == "judges-pinned" else None
                with Load(a.workers, str(a.checkpoint), gate, a.judge_threads, a.judge_nice, load_cpus):
                    summary = train_row(a, extra, run_dir, trainer_cpus, env_extra)
            results.append({"row": name, "trainer_cpus": len(trainer_cpus) if trainer_cpus else len(usable),
                            "trainer_threads": 1 if env_extra else None, **summary})
            print(f"{name}: {summary}", flush=True)
    return results


def table(results: list[dict[str, Any]], workers: int) -> str:
    base = next((r["steps_per_s"] for r in results if r["row"] == "alone"), None)
    rows = []
    for r in results:
        load = "-" if r["row"] == "alone" else f"{workers} judges"
        ms = lambda v: "-" if v is None else f"{1e3 * v:.1f}"  # noqa: E731
        ratio = f"{r['steps_per_s'] / base:.2f}" if base and r["steps_per_s"] else "-"
        rows.append([r["row"], load, str(r["trainer_cpus"]), str(r["trainer_threads"] or "default"),
                     ms(r["collection_s"]), ms(r["learning_s"]), f"{r['steps_per_s']:,.0f}" if r["steps_per_s"] else "-",
                     ratio])
    return format_table(["row", "load", "trainer CPUs", "trainer threads", "collection ms", "learning ms",
                         "samples/s", "vs alone"], rows)


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    from isaac_adapter.evaluation.gate import GateConfig

    own, extra = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                allow_abbrev=False)
    p.add_argument("--rows", nargs="+", choices=ROWS, default=list(ROWS))
    p.add_argument("--iterations", type=int, default=60, help="iterations timed per row (then SIGTERM)")
    p.add_argument("--warmup", type=int, default=10, help="iterations left out of the medians")
    p.add_argument("--num-envs", type=int, default=4096)
    p.add_argument("--sim", default="warp")
    p.add_argument("--device", default="cuda")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=4, help="judges in the load (time_to_walk.py's default)")
    p.add_argument("--judge-threads", type=int, default=2)
    p.add_argument("--judge-nice", type=int, default=10, choices=range(20), metavar="0-19")
    p.add_argument("--trainer-cpus", type=int, default=4, help="judges-pinned: the trainer's CPUs (the first ones)")
    p.add_argument("--checkpoint", type=Path, default=DEFAULT_CHECKPOINT, help="what the judges judge")
    p.add_argument("--gate-starts", type=int, default=GateConfig.starts)
    p.add_argument("--gate-horizon-s", type=float, default=GateConfig.horizon_s)
    p.add_argument("--gate-seed", type=int, default=GateConfig.seed)
    p.add_argument("--stop-timeout-s", type=float, default=60.0)
    p.set_defaults(nproc=1)  # one trainer process (time_to_walk.check_device reads it)
    a = p.parse_args(own)
    if a.iterations <= a.warmup:
        p.error(f"--iterations {a.iterations} must be more than --warmup {a.warmup}")
    if a.workers < 1 or a.judge_threads < 1:
        p.error("--workers and --judge-threads must be >= 1")
    if any(row != "alone" for row in a.rows) and not a.checkpoint.is_file():
        p.error(f"--checkpoint {a.checkpoint}: no such file (the judges' load needs a checkpoint to judge)")
    a.pinned = None  # judges-pinned: (the trainer's CPUs, the judges')
    if "judges-pinned" in a.rows:
        try:
            a.pinned = split_cpus(sorted(os.sched_getaffinity(0)), a.trainer_cpus)
        except ValueError as err:
            p.error(str(err))
    return a, extra


def main(argv: list[str] | None = None) -> int:
    a, extra = parse_args(sys.argv[1:] if argv is None else argv)
    ttw.check_device(a)
    facts = cpu_facts()
    print(f"CPUs: {facts['cpu_count']} seen, {facts['usable_cpus']} usable, {facts['threads_per_core']} threads per "
          f"core, cgroup quota {facts['cgroup_cpu_quota'] or 'none'}; trainer: g1_walk.py {' '.join(extra)}", flush=True)
    results = run(a, extra)
    print(table(results, a.workers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
