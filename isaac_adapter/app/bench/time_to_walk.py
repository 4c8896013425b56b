"""Time to walk: how long fresh G1 training runs take until a checkpoint passes the gate.

    python benchmarks/time_to_walk.py --seeds 0 1 2 --modes exact --save-interval 20 --out runs/ttw -- --task G1-Walk-Clock-Fast-v0 --symmetry both --tf32
    python benchmarks/time_to_walk.py --seeds 0 1 2 --nproc 2 --out runs/ttw2      # torchrun, envs per GPU
    python benchmarks/time_to_walk.py --seeds 0 --modes exact -- --num-steps-per-env 32   # after --: g1_walk.py flags
    python benchmarks/time_to_walk.py --table runs/ttw                              # re-print the table, run nothing
    python benchmarks/time_to_walk.py --table runs/ttw_s0 runs/ttw_s1               # one table of both, medians over both
    python benchmarks/time_to_walk.py --judge-only runs/ttw/exact_s0                # judge a run folder's checkpoints
    python benchmarks/time_to_walk.py --seeds 0 1 2 --modes state_value --parallel 3 --out runs/sv   # samples only
    python benchmarks/time_to_walk.py --judge-when after --max-iterations 560 --save-interval 20 -- --task G1-Walk-Clock-Fast-v1 --symmetry both --tf32 --cuda-graph-step
    python benchmarks/time_to_walk.py --seeds 0 1 2 --modes exact --save-interval 20 -- --task G1-Walk-Clock-Fast-v2 --symmetry both --tf32 --cuda-graph-step
    python benchmarks/time_to_walk.py --seeds 23 31 --modes exact --save-interval 20 --hold 3 -- --task G1-Walk-Clock-Fast-v2 --symmetry both --tf32 --cuda-graph-step

For each mode (``--timeout-bootstrap`` of examples/g1_walk.py) and seed, one fresh training process
(``torchrun --standalone --nproc-per-node N`` when ``--nproc`` > 1) trains into ``OUT/<mode>_s<seed>``
with a wall-clock budget from its launch. Meanwhile a pool of ``--judge-workers`` CPU processes
(``--judge-threads`` torch and MuJoCo threads each, so that the judges leave cores to the trainer,
and ``--judge-nice`` lower in the scheduler's priority than it, so that its host thread, which
feeds the GPU, is not the one kept waiting)
runs the gate (``isaac_adapter/evaluation/gate.py``, as ``benchmarks/g1_gate.py`` does) on every
checkpoint as soon as it is visible (checkpoints are written through a rename, so a visible
``model_<it>.pt`` is complete). The first checkpoint that passes, with every earlier one judged and
failed, ends the run: the trainer gets SIGTERM (the Runner finishes its iteration, saves and exits).
A run whose budget ends first gets SIGTERM too; the checkpoint it saves then is judged as well (if
it passes, the run reached the gate a little after its budget, and (b) says so). Otherwise the run
is 'not reached', and the checkpoint closest to passing is kept (fewest failing gate lines, then the
smallest relative shortfall).

With ``--hold N`` (N > 1) the first pass does not end the run: it goes on, every checkpoint judged,
until N checkpoints in a row have passed, and the record adds from which iteration the gate held
(the first of those N), its samples and (a), and when the N-th was written. (a) and (b) still count
to the first pass.

Two measures per run:

* (a) samples-to-gate / steady samples/s. Samples: env steps of all processes up to the first
  passing checkpoint (the checkpoint's ``total_steps``, which counts one process, times its world
  size). Steady samples/s: median over the run's iterations, the first ``--warmup-iterations``
  skipped, of the Runner's ``perf/steps_per_s`` (collection and update time, all processes).
* (b) wall clock: the passing checkpoint's file time minus the trainer's launch time, so start-up,
  Warp kernel compilation, CUDA-graph capture and checkpoint writes are in it. By default
  (``--warp-cache cold``) each run compiles its kernels into an empty cache of its own, so every
  run's (b) includes the whole compilation; ``--warp-cache fresh`` empties also the caches a machine
  keeps of other compilations (the CUDA driver's machine code for PTX, Triton's and Inductor's
  kernels), so that a run is as cold as the first process of a fresh machine; ``--warp-cache shared``
  uses the machine's cache, where only a first run compiles (a warm start, as on a workstation that
  has trained the task before).

The judges share the machine with the trainer, so the steady samples/s is the trainer's speed while
checkpoints are judged beside it. With ``--judge-when after`` nothing is judged until the trainer
has exited (at its budget, or at ``--max-iterations``): the trainer then has the machine to itself,
so its speed is the training speed alone, and (b) still reads the checkpoint's file time; but no
run ends early at the gate, so give each the iterations it needs. ``--parallel N`` runs up to N trainers at once on the device: the
samples to the gate still compare (they do not depend on speed), the speeds do not, so those runs
show no speed in the table and are left out of the speed medians. Prints a table per run and a median per mode (a run that did not
reach the gate counts as infinitely long, so the median is finite when more than half reached it;
"(a) of the medians" is the median samples to the gate, shared runs included, over the median steady
samples/s of the runs alone on the device),
and writes ``OUT/time_to_walk.json`` (every judged checkpoint, the machine, the command line).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import math
import multiprocessing
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable

from ppo_bootstrap.episode import TIMEOUT_BOOTSTRAP_MODES

from isaac_adapter.app.bench.common import format_table

REPO = Path(__file__).resolve().parents[3]  # the checkout
TRAIN_SCRIPT = REPO / "examples" / "g1_walk.py"
RESULTS = "time_to_walk.json"
RUN_META = "time_to_walk_run.json"  # written into each run folder at launch: what --judge-only reads back
MODES = TIMEOUT_BOOTSTRAP_MODES
CHECKPOINT = re.compile(r"^model_(\d+)\.pt$")


# -- bookkeeping: pure functions -----------------------------------------------------------------


def steady_median(rows: list[dict[str, Any]], warmup: int, key: str = "perf/steps_per_s") -> float | None:
    """Median ``key`` (``perf/steps_per_s`` by default) of the metrics ``rows`` (one per iteration)
    after the first ``warmup``.

    The first iterations are skipped because they are not steady: Warp compiles its kernels and
    captures its CUDA graphs when the env is built (before iteration 1 is timed), but what runs for
    the first time inside training still lands in them (CUDA modules torch and Warp load lazily,
    cuBLAS set-up, the caching allocator growing to its working size). None when no row is left.
    """
    ordered = sorted(rows, key=lambda r: r["iteration"])[warmup:]
    values = [float(r[key]) for r in ordered if key in r]
    return statistics.median(values) if values else None


def samples(total_steps: int, world_size: int = 1) -> int:
    """Env steps of all processes: the Runner's ``total_steps`` counts its own process only."""
    return int(total_steps) * int(world_size)


def measure_a(samples_to_gate: int | None, steps_per_s: float | None) -> float | None:
    """Measure (a): samples to the gate over the steady samples/s, in seconds."""
    if samples_to_gate is None or not steps_per_s:
        return None
    return samples_to_gate / steps_per_s


def first_pass(judged: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """The judged checkpoint of the lowest iteration that passed, or None."""
    passed = [r for r in judged if r.get("passed")]
    return min(passed, key=lambda r: r["iteration"]) if passed else None


def gate_held(judged: Iterable[dict[str, Any]], hold: int) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The first ``hold`` judged checkpoints in a row that all passed, as ``(first, last)`` of them, or
    None. ``hold`` 1 is the first pass (``first is last``). Only checkpoints judged count: the caller
    says when no checkpoint between them still waits for its judgment (:func:`settled_stop`)."""
    rows = sorted(judged, key=lambda r: r["iteration"])
    streak = 0
    for k, row in enumerate(rows):
        streak = streak + 1 if row.get("passed") else 0
        if streak == hold:
            return rows[k - hold + 1], row
    return None


def settled_stop(judged: Iterable[dict[str, Any]], pending: Iterable[int], hold: int = 1) -> dict[str, Any] | None:
    """The checkpoint that ends the run: with ``hold`` 1 the first pass, else the last of the first
    ``hold`` passes in a row; None while none is known or a checkpoint before it waits for its
    judgment (``pending`` iterations)."""
    held = gate_held(judged, hold)
    if held is None or any(it < held[1]["iteration"] for it in pending):
        return None
    return held[1]


def shortfall(lines: list[dict[str, Any]]) -> float:
    """Sum over failing gate lines of how far each misses its threshold, relative to the threshold."""
    total = 0.0
    for line in lines:
        if line.get("passed"):
            continue
        scale = abs(line["threshold"]) or 1.0
        total += abs(line["value"] - line["threshold"]) / scale
    return total


def closest(judged: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """The judged checkpoint nearest to passing: fewest failing lines, smallest shortfall, latest iteration."""
    rows = [r for r in judged if r.get("lines")]
    if not rows:
        return None
    return min(rows, key=lambda r: (len(r["failed"]), shortfall(r["lines"]), -r["iteration"]))


def judged_row(iteration: int, name: str, written_s: float | None, result: dict[str, Any]) -> dict[str, Any]:
    """One judged checkpoint: what the judge returned plus where and when the file was written."""
    lines = result.get("lines") or []
    row = {
        "iteration": iteration,
        "checkpoint": name,
        "written_s": written_s,
        "total_steps": result.get("total_steps"),
        "world_size": result.get("world_size", 1),
        "passed": bool(result.get("passed")) and not result.get("error"),
        "failed": [line["name"] for line in lines if not line.get("passed")],
        "lines": lines,
        "judge_s": result.get("judge_s"),
    }
    if row["total_steps"] is not None:
        row["samples"] = samples(row["total_steps"], row["world_size"])
    for key in ("per_command", "error"):
        if key in result:
            row[key] = result[key]
    return row


def summarize_run(meta: dict[str, Any], metrics: list[dict[str, Any]], judged: list[dict[str, Any]],
                  warmup: int) -> dict[str, Any]:
    """The record of one run from its launch ``meta``, metrics rows and judged checkpoints.

    ``meta`` holds at least ``mode``, ``seed``, ``num_envs`` (per process), ``nproc`` and
    ``launch_time`` (seconds since the epoch, or None when unknown); with ``hold`` > 1 (``--hold``)
    the record also says from which iteration the gate held that many checkpoints in a row.
    """
    judged = sorted(judged, key=lambda r: r["iteration"])
    metrics = sorted(metrics, key=lambda r: r["iteration"])
    launch = meta.get("launch_time")
    sps = steady_median(metrics, warmup)
    alone_until = judged[0]["iteration"] if judged and meta.get("judge_when") != "after" else None
    # up to the first checkpoint (or all along, judged after the run) no judge ran beside the trainer
    alone = [r for r in metrics if alone_until is None or r["iteration"] <= alone_until]
    record = {**meta, "warmup_iterations": warmup, "steady_steps_per_s": sps,
              # with --parallel > 1 trainers shared the device: samples compare, speeds do not
              "speed_comparable": meta.get("parallel", 1) == 1,
              # where an iteration's time goes: the rollout and the update (seconds, steady medians)
              "collection_s": steady_median(metrics, warmup, "perf/collection_s"),
              "learning_s": steady_median(metrics, warmup, "perf/learning_s"),
              "learning_s_unjudged": steady_median(alone, warmup, "perf/learning_s"),
              "steady_steps_per_s_unjudged": steady_median(alone, warmup),
              # how far each update moved the policy (the adaptive schedule aims at desired_kl)
              "kl": steady_median(metrics, warmup, "policy/kl"),
              "iterations": metrics[-1]["iteration"] if metrics else 0,
              "first_iteration_s": (metrics[0]["time"] - launch) if metrics and launch is not None else None,
              "judged": judged}
    passed = first_pass(judged)
    record["reached"] = passed is not None
    if passed is not None:
        train_s = sum(r["perf/collection_s"] + r["perf/learning_s"] for r in metrics
                      if r["iteration"] <= passed["iteration"])
        record.update(gate_iteration=passed["iteration"], samples_to_gate=passed.get("samples"),
                      measure_a_s=measure_a(passed.get("samples"), sps), wall_to_gate_s=passed["written_s"],
                      measure_a_unjudged_s=measure_a(passed.get("samples"), record["steady_steps_per_s_unjudged"]),
                      train_s_to_gate=train_s if metrics else None, closest=None)
    else:
        near = closest(judged)
        record.update(gate_iteration=None, samples_to_gate=None, measure_a_s=None, wall_to_gate_s=None,
                      train_s_to_gate=None,
                      closest=None if near is None else {k: near[k] for k in ("iteration", "failed", "lines")})
    hold = meta.get("hold", 1)
    if hold > 1:
        held = gate_held(judged, hold)
        record.update(held_iteration=held[0]["iteration"] if held else None,
                      held_samples=held[0].get("samples") if held else None,
                      held_confirmed_iteration=held[1]["iteration"] if held else None,
                      wall_to_held_s=held[1]["written_s"] if held else None)
    return record


def label(record: dict[str, Any]) -> str:
    """What a run is compared under: ``variant/mode`` with ``--variant``, else the mode."""
    return f"{record['variant']}/{record['mode']}" if record.get("variant") else record["mode"]


def _median_or_inf(values: list[float | None], reached: list[bool]) -> float | None:
    """Median with runs that did not reach the gate as +inf (None: no runs, or no value at all)."""
    xs = [v if ok else math.inf for v, ok in zip(values, reached) if not ok or v is not None]
    return statistics.median(xs) if xs else None


def group_key(record: dict[str, Any], by: str = "variant") -> str:
    """What a median is taken over: ``variant`` (:func:`label`) or ``mode`` alone, which pools runs of
    differently named variants that train the same task (a ramp given on the command line and the
    task id that presets it)."""
    return record["mode"] if by == "mode" else label(record)


def mode_summary(records: list[dict[str, Any]], by: str = "variant") -> list[dict[str, Any]]:
    """Per group (:func:`group_key`), in first-seen order: runs, how many reached the gate, medians
    over seeds."""
    out = []
    for mode in dict.fromkeys(group_key(r, by) for r in records):
        runs = [r for r in records if group_key(r, by) == mode]
        reached = [r["reached"] for r in runs]
        timed = [r for r in runs if r.get("speed_comparable", True)]  # alone on the device
        timed_reached = [r["reached"] for r in timed]
        sps = [r["steady_steps_per_s"] for r in timed if r["steady_steps_per_s"]]
        samples = _median_or_inf([r["samples_to_gate"] for r in runs], reached)
        steady = statistics.median(sps) if sps else None
        out.append({
            "mode": mode,
            "runs": len(runs),
            "reached": sum(reached),
            "samples_to_gate": samples,
            "timed_runs": len(timed),
            "steady_steps_per_s": steady,
            "measure_a_s": _median_or_inf([r["measure_a_s"] for r in timed], timed_reached),
            # the same at each run's speed before any judge shared the CPU (older records: None)
            "measure_a_unjudged_s": _median_or_inf([r.get("measure_a_unjudged_s") for r in timed], timed_reached)
            if any(r.get("steady_steps_per_s_unjudged") for r in timed) else None,
            # the goals table's (a): samples of every run (shared ones count) over the speed of those alone
            "measure_a_of_medians_s": samples / steady if samples is not None and steady else None,
            "wall_to_gate_s": _median_or_inf([r["wall_to_gate_s"] for r in timed], timed_reached),
            "first_iteration_s": statistics.median(v) if (v := [r["first_iteration_s"] for r in timed
                                                                 if r["first_iteration_s"] is not None]) else None,
        })
    return out


def _num(value: float | None, fmt: str, unit: str = "") -> str:
    if value is None:
        return "-"
    if math.isinf(value):
        return "not reached"
    return format(value, fmt) + unit


def _envs(record: dict[str, Any]) -> str:
    n = record.get("nproc", 1)
    return f"{n}x{record['num_envs']}" if n > 1 else str(record["num_envs"])


HEADERS = ["mode", "seed", "envs", "gate it", "samples to gate", "steady samples/s", "(a) s",
           "(b) wall s", "1st it s"]


def table_rows(records: list[dict[str, Any]]) -> list[list[str]]:
    rows = []
    for r in records:
        timed = r.get("speed_comparable", True)
        speed = ([_num(r["steady_steps_per_s"], ",.0f"), _num(r["measure_a_s"], ".1f"),
                  _num(r["wall_to_gate_s"], ".1f"), _num(r["first_iteration_s"], ".1f")] if timed
                 else [f"shared ({r.get('parallel')} at once)", "-", "-", "-"])
        rows.append([label(r), str(r["seed"]), _envs(r),
                     str(r["gate_iteration"]) if r["reached"] else "not reached",
                     _num(r["samples_to_gate"], ",d") if r["reached"] else "-", *speed])
    return rows


def format_line(line: dict[str, Any]) -> str:
    return f"{line['name']} {line['value']:.3g} ({line['op']} {line['threshold']:g})"


def last_failures(judged: list[dict[str, Any]]) -> dict[str, int | None]:
    """Per gate line, the last judged iteration at which it failed (None: never): the line failed last
    is the one that held the run back (a standing policy passes the smoothness lines early, so the
    first pass says little)."""
    out: dict[str, int | None] = {}
    for row in sorted((r for r in judged if r.get("lines")), key=lambda r: r["iteration"]):
        for ln in row["lines"]:
            out.setdefault(ln["name"], None)
            if not ln.get("passed"):
                out[ln["name"]] = row["iteration"]
    return out


def format_results(records: list[dict[str, Any]], by: str = "variant") -> str:
    """The per-run table, a note per run that did not reach the gate, and a median line per group
    (:func:`group_key`)."""
    out = [format_table(HEADERS, table_rows(records), left=2)]
    for r in records:
        errors = [row for row in r["judged"] if row.get("error")]
        if errors:
            out.append(f"{label(r)} seed {r['seed']}: {len(errors)} checkpoint(s) could not be judged, counted as "
                       f"failing; iteration {errors[0]['iteration']}: {errors[0]['error']}")
        if r.get("collection_s") is not None and r.get("learning_s") is not None and r.get("speed_comparable", True):
            kl, before, tail = r.get("kl"), "", ""
            if r.get("judge_when") == "after":  # the whole run was unjudged: nothing to tell apart
                before = " (judged after the run: the trainer alone)"
            else:
                unjudged, rate, a_alone = (r.get(k) for k in ("learning_s_unjudged", "steady_steps_per_s_unjudged",
                                                               "measure_a_unjudged_s"))
                if unjudged:
                    before = f" ({unjudged:.3f} s up to the first checkpoint, before any judging)"
                tail = (f"; before any judging {rate:,.0f} samples/s" if rate else "") + (
                    f", (a) at that rate {a_alone:.1f} s" if a_alone else "")
            out.append(f"{label(r)} seed {r['seed']}: per iteration (steady medians) collection "
                       f"{r['collection_s']:.3f} s, learning {r['learning_s']:.3f} s{before}"
                       + (f"; KL {kl:.4f}" if kl is not None else "") + tail)
        if r.get("startup_s"):  # what the first iteration waited for (the rest of it: the iteration itself)
            st = r["startup_s"]
            out.append(f"{label(r)} seed {r['seed']}: startup {st['setup']:.1f} s to import and configure, "
                       f"{st['env']:.1f} s to build the env, {st['learner']:.1f} s to build the learner; first "
                       f"iteration done {_num(r.get('first_iteration_s'), '.1f', ' s')} after launch")
        walking = walking_first_pass(r["judged"])
        if walking is not None:  # --judge robust: where the walking gate alone passed first
            a_walk = measure_a(walking.get("samples"), r.get("steady_steps_per_s"))
            out.append(f"{label(r)} seed {r['seed']}: the walking gate alone first passed at iteration "
                       f"{walking['iteration']} ({_num(walking.get('samples'), ',.0f')} samples, (a) "
                       f"{_num(a_walk, '.1f', ' s')}); the robustness gate judged there and after")
        if r.get("hold", 1) > 1:
            held = r.get("held_iteration")
            out.append(f"{label(r)} seed {r['seed']}: " + (
                f"the gate held from iteration {held} ({_num(r.get('held_samples'), ',.0f')} samples, (a) "
                f"{_num(measure_a(r.get('held_samples'), r.get('steady_steps_per_s')), '.1f', ' s')}): "
                f"{r['hold']} checkpoints in a row passed, the last at iteration {r['held_confirmed_iteration']}, "
                f"written {_num(r.get('wall_to_held_s'), '.1f', ' s')} after launch" if held is not None
                else f"the gate did not hold for {r['hold']} checkpoints in a row"))
        lasts = last_failures(r["judged"])
        if lasts:
            out.append(f"{label(r)} seed {r['seed']}: last judged iteration each gate line failed: " + "; ".join(
                f"{name} {'never' if it is None else it}" for name, it in lasts.items()))
        if r["reached"]:
            continue
        near = r.get("closest")
        what = (f"closest: iteration {near['iteration']}, failing " + "; ".join(
            format_line(line) for line in near["lines"] if not line.get("passed"))) if near else "no checkpoint judged"
        budget = f" in {r['budget_s']:g} s" if r.get("budget_s") else ""
        out.append(f"{label(r)} seed {r['seed']}: not reached{budget} "
                   f"({len(r['judged'])} checkpoints judged, last iteration {r['iterations']}); {what}")
    for s in mode_summary(records, by):
        shared = s["runs"] - s.get("timed_runs", s["runs"])
        timing = f" (speeds of the {s['timed_runs']} run(s) alone on the device)" if shared else ""
        out.append(f"{s['mode']}: reached {s['reached']}/{s['runs']}; median over seeds: samples to gate "
                   f"{_num(s['samples_to_gate'], ',.0f')}{timing}, "
                   f"steady {_num(s['steady_steps_per_s'], ',.0f', ' samples/s')}, "
                   f"(a) {_num(s['measure_a_s'], '.1f', ' s')} (of the medians "
                   f"{_num(s['measure_a_of_medians_s'], '.1f', ' s')}), (b) {_num(s['wall_to_gate_s'], '.1f', ' s')}, "
                   f"first iteration {_num(s['first_iteration_s'], '.1f', ' s')}"
                   + (f"; (a) at the speeds before any judging {_num(s['measure_a_unjudged_s'], '.1f', ' s')}"
                      if s.get("measure_a_unjudged_s") is not None else ""))
    return "\n".join(out)


def trainer_command(python: str, nproc: int, args: list[str]) -> list[str]:
    """examples/g1_walk.py with ``args``, under torchrun when ``nproc`` > 1 (rank r takes cuda:r)."""
    launcher = [python] if nproc <= 1 else [python, "-m", "torch.distributed.run", "--standalone",
                                             "--nproc-per-node", str(nproc)]
    return [*launcher, str(TRAIN_SCRIPT), *args]


def training_args(mode: str, seed: int, a: argparse.Namespace, run_dir: Path, extra: list[str]) -> list[str]:
    args = ["--sim", a.sim, "--device", a.device, "--num_envs", str(a.num_envs), "--max_iterations",
            str(a.max_iterations), "--seed", str(seed), "--save-interval", str(a.save_interval), "--log-dir",
            str(run_dir), "--timeout-bootstrap", mode]
    if not a.validate:
        args.append("--no-validate")  # a trusted env, as benchmarks/train_gpu.py runs it
    return [*args, *extra]


def run_name(variant: tuple[str, list[str]], mode: str, seed: int) -> str:
    """The run folder's name: ``<variant>_<mode>_s<seed>``, or ``<mode>_s<seed>`` without variants."""
    return f"{variant[0]}_{mode}_s{seed}" if variant[0] else f"{mode}_s{seed}"


def parse_variant(text: str) -> tuple[str, list[str]]:
    """``"smooth=--task G1-Walk-Smooth-v0 env.rewards.action_rate=-0.1"`` -> ``("smooth", [...])``."""
    name, sep, args = text.partition("=")
    if not sep or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        raise SystemExit(f"error: --variant {text!r}: expected NAME=ARGS, NAME of letters, digits, '.', '_', '-'")
    return name, shlex.split(args)


# the compile caches, besides Warp's, that a process finds warm on a machine that has trained before:
# the driver's machine code for PTX modules, and torch's Triton kernels (GAE, the compiled update)
FRESH_CACHES = {"CUDA_CACHE_PATH": "cuda_jit_cache", "TRITON_CACHE_DIR": "triton_cache",
                "TORCHINDUCTOR_CACHE_DIR": "inductor_cache"}


def trainer_env(warp_cache: str, run_dir: Path, overrides: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a trainer that runs in ``run_dir``: this process's, unbuffered, and with
    ``warp_cache`` "cold" Warp's kernel cache in an empty folder of the run's own (``run_dir/warp_cache``),
    with "fresh" also the CUDA driver's JIT cache and Triton's and Inductor's (:data:`FRESH_CACHES`);
    ``overrides`` (``--trainer-env``) last, for the trainer alone (the judges keep this process's)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if warp_cache in ("cold", "fresh"):
        env["WARP_CACHE_PATH"] = str((run_dir / "warp_cache").resolve())
    if warp_cache == "fresh":  # the machine's other compile caches too, empty as on a fresh machine
        for name, folder in FRESH_CACHES.items():
            env[name] = str((run_dir / folder).resolve())
    return {**env, **(overrides or {})}


def parse_env_setting(text: str) -> tuple[str, str]:
    """``"PYTHONPATH=/opt/isaac"`` -> ``("PYTHONPATH", "/opt/isaac")``."""
    name, sep, value = text.partition("=")
    if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise SystemExit(f"error: --trainer-env {text!r}: expected NAME=VALUE, NAME a variable name")
    return name, value


def checkpoints(run_dir: Path) -> dict[int, Path]:
    """``{iteration: path}`` of the complete ``model_<it>.pt`` in ``run_dir`` (temporaries have other names)."""
    found = {}
    for path in run_dir.glob("model_*.pt"):
        match = CHECKPOINT.match(path.name)
        if match:
            found[int(match.group(1))] = path
    return dict(sorted(found.items()))


def load_metrics(run_dir: Path) -> list[dict[str, Any]]:
    """``metrics.jsonl`` rows by iteration (the later row of a repeated iteration wins, as
    ``ppo_bootstrap.runner.read_metrics``); a line cut short by a killed writer is skipped."""
    rows: dict[int, dict[str, Any]] = {}
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return []
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        rows[int(row["iteration"])] = row
    return [rows[k] for k in sorted(rows)]


STARTUP_LINE = re.compile(r"startup: ([\d.]+) s to import and configure, ([\d.]+) s to build the env, "
                          r"([\d.]+) s to build the learner")


def read_startup(log: Path) -> dict[str, float] | None:
    """The trainer's ``startup:`` line in ``log`` (examples/g1_walk.py prints it before the first
    iteration): seconds to import and configure, to build the env, to build the learner; None if absent."""
    try:
        found = STARTUP_LINE.search(log.read_text(errors="replace"))
    except OSError:
        return None
    return None if found is None else dict(zip(("setup", "env", "learner"), map(float, found.groups())))


def run_folder_facts(run_dir: Path) -> dict[str, Any]:
    """What a finished run's folder adds to its record: the checkpoints written and the trainer's
    startup split (:func:`read_startup` of its ``train.log``)."""
    return {"checkpoints_written": list(checkpoints(run_dir)), "startup_s": read_startup(run_dir / "train.log")}


def log_tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join("  " + line for line in text[-lines:]) or "  (empty log)"


# -- judging -------------------------------------------------------------------------------------


def _judge_init(threads: int, nice: int = 0) -> None:
    import torch

    os.nice(nice)  # niceness up by ``nice``: the trainer comes first when the cores are all busy
    torch.set_num_threads(threads)
    torch.set_grad_enabled(False)


#: what a robustness-gate line's name starts with in a ``--judge robust`` record
ROBUST_PREFIX = "robust: "


def with_robust_gate(walking: dict[str, Any], robust: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``--judge robust``: the walking gate's result ``walking``, and when it passed, the robustness
    gate's (``robust()``, run only then: a policy that fails without pushes fails with them) after it,
    its lines named ``robust: <line>``; passed when both passed."""
    if not walking["passed"]:
        return walking
    extra = robust()
    lines = walking["lines"] + [{**line, "name": ROBUST_PREFIX + line["name"]} for line in extra["lines"]]
    per_command = {**walking["per_command"], **{ROBUST_PREFIX + k: v for k, v in extra["per_command"].items()}}
    return {**walking, "passed": extra["passed"], "lines": lines, "per_command": per_command}


def walking_first_pass(judged: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """In a ``--judge robust`` record, the first judged checkpoint whose walking-gate lines all
    passed (its robustness lines, :data:`ROBUST_PREFIX`, set aside); None in other records."""
    rows = sorted((r for r in judged if r.get("lines")), key=lambda r: r["iteration"])
    if not any(line["name"].startswith(ROBUST_PREFIX) for r in rows for line in r["lines"]):
        return None
    return next((r for r in rows if all(line.get("passed") for line in r["lines"]
                                        if not line["name"].startswith(ROBUST_PREFIX))), None)


def judge_checkpoint(path: str, gate: dict[str, Any], threads: int) -> dict[str, Any]:
    """Run the gate on one checkpoint on CPU MuJoCo (what benchmarks/g1_gate.py does), or with
    ``gate["judge"] == "acceptance"`` training's closing gait acceptance; never raises."""
    start = time.perf_counter()
    out: dict[str, Any] = {}
    try:
        from ppo_bootstrap import checkpoint

        from isaac_adapter.evaluation.gate import GateConfig, acceptance_checkpoint, gate_checkpoint, robust_gate_config

        ckpt = checkpoint.read(path)
        out.update(iteration=int(ckpt.get("iteration", -1)), total_steps=int(ckpt.get("total_steps", 0)),
                   world_size=int(ckpt.get("world_size", 1)))
        del ckpt
        settings = dict(gate)
        judge = settings.pop("judge", "gate")
        if judge == "acceptance":
            result = acceptance_checkpoint(path, settings["starts"], settings["seed"], physics_threads=threads)
        else:
            result = gate_checkpoint(path, GateConfig(**settings), physics_threads=threads)
        result = result.as_dict()
        if judge == "robust":
            result = with_robust_gate(result, lambda: gate_checkpoint(
                path, robust_gate_config(**settings), physics_threads=threads).as_dict())
        out.update(passed=result["passed"], lines=result["lines"], per_command=result["per_command"])
    except Exception as err:  # a checkpoint that cannot be judged fails, with the reason in the record
        out.update(passed=False, error=f"{type(err).__name__}: {err}")
    out["judge_s"] = time.perf_counter() - start
    return out


class Judges:
    """A pool of CPU processes judging checkpoints, ``threads`` torch and MuJoCo threads each, each
    ``nice`` steps lower in scheduling priority than this process."""

    def __init__(self, workers: int, threads: int, gate: dict[str, Any], nice: int = 0) -> None:
        self.threads, self.gate = threads, gate
        # spawn: the parent may hold a CUDA context, which forked children must not inherit
        self.pool = cf.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                           initializer=_judge_init, initargs=(threads, nice))

    def submit(self, path: Path) -> cf.Future:
        return self.pool.submit(judge_checkpoint, str(path), self.gate, self.threads)

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def _result(future: cf.Future) -> dict[str, Any]:
    try:
        return future.result()
    except Exception as err:  # the worker died (out of memory, a crash in native code)
        return {"passed": False, "error": f"judge process: {type(err).__name__}: {err}"}


class Trainer:
    """One training process, in its own process group, with its output in ``log``."""

    def __init__(self, command: list[str], log: Path, env: dict[str, str]) -> None:
        self.log = log
        self._log_file = open(log, "w")
        self.launch_time = time.time()
        self.proc = subprocess.Popen(command, stdout=self._log_file, stderr=subprocess.STDOUT, env=env, cwd=REPO,
                                     start_new_session=True)
        self.signalled_at: float | None = None

    def poll(self) -> int | None:
        return self.proc.poll()

    def terminate(self) -> None:
        """SIGTERM to the launcher alone (torchrun passes it on once; a second one would skip the save)."""
        if self.signalled_at is None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.signalled_at = time.time()

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def stop(self, timeout: float) -> int:
        """SIGTERM, then SIGKILL to the whole group after ``timeout`` s; the exit status."""
        self.terminate()
        try:
            self.proc.wait(timeout)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):  # too slow, or the user will not wait
            self.kill()
            self.proc.wait()
        self.kill()  # what the launcher left behind (torchrun's workers after its own exit)
        self._log_file.close()
        return self.proc.returncode


def watch(run_dir: Path, judges: Judges, launch_time: float | None, trainer: Trainer | None = None,
          budget_s: float | None = None, stop_timeout: float = 120.0, poll_s: float = 0.5,
          abort: threading.Event | None = None, judge_after: bool = False, hold: int = 1) -> dict[str, Any]:
    """Judge every checkpoint ``run_dir`` gets until the first pass is settled, stopping ``trainer`` on
    the first pass, at the end of ``budget_s``, or once ``abort`` is set (a run beside it failed).
    With ``hold`` > 1, the first pass is not the end: the run goes on until ``hold`` checkpoints in a
    row have passed (:func:`gate_held`). With ``judge_after``, judging starts once the trainer has
    exited, so it runs alone. Returns judged rows, why the run stopped, the exit status."""
    pending: dict[cf.Future, tuple[int, str, float | None]] = {}
    submitted: set[int] = set()
    judged: dict[int, dict[str, Any]] = {}
    stop, returncode = None, None
    exited = trainer is None
    deadline = None if trainer is None or budget_s is None else trainer.launch_time + budget_s
    while True:
        if not exited and (rc := trainer.poll()) is not None:
            exited, returncode = True, rc
            if trainer.signalled_at is None:
                stop = "trainer finished" if rc == 0 else "trainer failed"
                if rc != 0:
                    break
        candidate = stop_candidate(judged, pending, hold)
        visible = checkpoints(run_dir) if exited or not judge_after else {}
        for it, path in visible.items():
            if it in submitted or (candidate is not None and it > candidate["iteration"]):
                continue
            try:
                written = path.stat().st_mtime - launch_time if launch_time is not None else None
            except FileNotFoundError:
                continue
            submitted.add(it)
            pending[judges.submit(path)] = (it, path.name, written)
        for future in [f for f in pending if f.done()]:
            it, name, written = pending.pop(future)
            if not future.cancelled():
                judged[it] = judged_row(it, name, written, _result(future))
        candidate = stop_candidate(judged, pending, hold)
        if candidate is not None:  # later checkpoints cannot change the end: drop those not yet started
            for future, (it, _, _) in list(pending.items()):
                if it > candidate["iteration"] and future.cancel():
                    del pending[future]
        if trainer is not None and not exited:
            now = time.time()
            if trainer.signalled_at is None and candidate is not None:
                trainer.terminate()
                stop = "gate passed"
            elif trainer.signalled_at is None and deadline is not None and now >= deadline:
                trainer.terminate()
                stop = "budget"
            elif trainer.signalled_at is None and abort is not None and abort.is_set():
                trainer.terminate()
                stop = "stopped: a run beside it failed"
            elif trainer.signalled_at is not None and now > trainer.signalled_at + stop_timeout:
                trainer.kill()
        if exited and (not pending or settled_stop(judged.values(), [it for it, _, _ in pending.values()], hold)):
            break
        time.sleep(poll_s)
    for future in pending:
        future.cancel()
    for future, (it, name, written) in pending.items():  # running judgments after the first pass: keep them
        if not future.cancelled():
            judged[it] = judged_row(it, name, written, _result(future))
    return {"judged": sorted(judged.values(), key=lambda r: r["iteration"]), "stop": stop,
            "returncode": returncode}


def stop_candidate(judged: dict[int, dict[str, Any]], pending: dict[cf.Future, tuple[int, str, float | None]],
                   hold: int) -> dict[str, Any] | None:
    """The checkpoint the run may stop at, judged so far: the first pass, which a checkpoint before it
    still being judged can only move earlier; a streak of ``hold`` > 1 only once none before its end
    waits for a judgment, since that one could break it."""
    if hold == 1:
        return first_pass(judged.values())
    return settled_stop(judged.values(), [it for it, _, _ in pending.values()], hold)


# -- the benchmark -------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {"cpu_count": os.cpu_count(), "python": platform.python_version(),
                            "torch": torch.__version__, "platform": platform.platform()}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
        info["gpu_count"] = torch.cuda.device_count()
    return info


def write_results(path: Path, results: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(results, indent=1))
    os.replace(tmp, path)


def gate_settings(a: argparse.Namespace) -> dict[str, Any]:
    judge = getattr(a, "judge", "gate")  # benchmarks that judge with the walking gate alone have no --judge
    if judge == "acceptance":  # 5 s at 0.5 m/s in --acceptance-envs noisy starts
        return {"judge": "acceptance", "starts": a.acceptance_envs, "seed": a.gate_seed}
    walking = {"starts": a.gate_starts, "horizon_s": a.gate_horizon_s, "seed": a.gate_seed}
    return {"judge": "robust", **walking} if judge == "robust" else walking


def check_device(a: argparse.Namespace) -> None:
    import torch

    if a.device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise SystemExit("error: --device cuda requested but torch.cuda.is_available() is False")
        if a.nproc > torch.cuda.device_count():
            raise SystemExit(f"error: --nproc {a.nproc} needs {a.nproc} GPUs, torch sees {torch.cuda.device_count()}")
    if a.sim == "warp" and not a.device.startswith("cuda"):
        raise SystemExit("error: --sim warp trains on a GPU: add --device cuda, or use --sim mujoco --device cpu")


def run_benchmark(a: argparse.Namespace, extra: list[str], argv: list[str]) -> dict[str, Any]:
    check_device(a)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    # seeds outer: drift over time hits every variant and mode
    runs = [(variant, mode, seed) for seed in a.seeds for variant in a.variants for mode in a.modes]
    for variant, mode, seed in runs:
        run_dir = out / run_name(variant, mode, seed)
        if run_dir.exists() and any(run_dir.iterdir()):
            if not a.overwrite:
                raise SystemExit(f"error: {run_dir} is not empty: each run starts fresh; pass --overwrite or "
                                 "another --out")
            shutil.rmtree(run_dir)
    gate = gate_settings(a)
    results: dict[str, Any] = {
        "command": shlex.join(["python", "benchmarks/time_to_walk.py", *argv]),
        "machine": machine(), "settings": {**{k: v for k, v in vars(a).items() if k not in ("table", "judge_only")},
                                           "extra": extra, "gate": gate},
        "runs": [],
    }
    result_path = out / RESULTS
    judges = Judges(a.judge_workers, a.judge_threads, gate, a.judge_nice)
    abort = threading.Event()
    lock = threading.Lock()

    def run_one(variant: tuple[str, list[str]], mode: str, seed: int) -> dict[str, Any]:
        name, variant_args = variant
        run_dir = out / run_name(variant, mode, seed)
        run_dir.mkdir(parents=True, exist_ok=True)
        env = trainer_env(a.warp_cache, run_dir, a.trainer_env_vars)
        command = trainer_command(sys.executable, a.nproc, training_args(mode, seed, a, run_dir, [*extra, *variant_args]))
        what_run = f"{name}/{mode}" if name else mode
        print(f"{what_run}, seed {seed}: launching {shlex.join(command)}", flush=True)
        trainer = Trainer(command, run_dir / "train.log", env)
        meta = {"mode": mode, "variant": name, "variant_args": variant_args, "seed": seed, "num_envs": a.num_envs,
                "nproc": a.nproc, "budget_s": a.budget_s, "launch_time": trainer.launch_time, "run_dir": str(run_dir),
                "log": str(trainer.log), "warp_cache": a.warp_cache, "trainer_command": command,
                "parallel": a.parallel, "judge_when": a.judge_when, "hold": a.hold}
        (run_dir / RUN_META).write_text(json.dumps(meta, indent=1))
        try:
            watched = watch(run_dir, judges, trainer.launch_time, trainer, a.budget_s, a.stop_timeout_s, abort=abort,
                            judge_after=a.judge_when == "after", hold=a.hold)
        finally:
            returncode = trainer.stop(a.stop_timeout_s)
        metrics = load_metrics(run_dir)
        if watched["stop"] == "trainer failed" or (watched["stop"] == "trainer finished" and not metrics):
            abort.set()
            status = watched["returncode"]
            raise SystemExit(f"error: examples/g1_walk.py ({what_run}, seed {seed}) exited with status {status} after "
                             f"{time.time() - trainer.launch_time:.0f} s; last lines of {trainer.log}:\n"
                             f"{log_tail(trainer.log)}")
        record = summarize_run({**meta, "stop": watched["stop"], "returncode": returncode}, metrics,
                               watched["judged"], a.warmup_iterations)
        record.update(run_folder_facts(run_dir))
        with lock:
            results["runs"].append(record)
            results["summary"] = mode_summary(results["runs"])
            write_results(result_path, results)
        what = (f"gate passed at iteration {record['gate_iteration']}, "
                f"{record['wall_to_gate_s']:.1f} s after launch" if record["reached"]
                else f"not reached ({watched['stop']})")
        print(f"{what_run}, seed {seed}: {what}; {len(record['judged'])} checkpoints judged", flush=True)
        return record

    try:
        if a.parallel == 1:
            for run in runs:
                run_one(*run)
        else:  # up to --parallel trainers at once; the first failure stops the others
            with cf.ThreadPoolExecutor(max_workers=a.parallel) as pool:
                futures = [pool.submit(run_one, *run) for run in runs]
                for future in cf.as_completed(futures):
                    if future.exception() is not None:
                        abort.set()
                        for other in futures:
                            other.cancel()
                errors = [f.exception() for f in futures if not f.cancelled() and f.exception() is not None]
                if errors:
                    raise errors[0]
    finally:
        judges.close()
    order = {run_name(*run): k for k, run in enumerate(runs)}
    results["runs"].sort(key=lambda r: order.get(Path(r["run_dir"]).name, len(order)))
    results["summary"] = mode_summary(results["runs"])
    write_results(result_path, results)
    return results


def judge_only(dirs: list[str], a: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    """Judge the checkpoints already in run folders, up to the first pass of each."""
    gate = gate_settings(a)
    judges = Judges(a.judge_workers, a.judge_threads, gate, a.judge_nice)
    results: dict[str, Any] = {"command": shlex.join(["python", "benchmarks/time_to_walk.py", *argv]),
                               "machine": machine(),
                               "settings": {"gate": gate, "warmup_iterations": a.warmup_iterations}, "runs": []}
    try:
        for d in dirs:
            run_dir = Path(d)
            if not run_dir.is_dir():
                raise SystemExit(f"error: --judge-only {d}: no such folder")
            meta = {**run_meta(run_dir), "hold": a.hold}
            watched = watch(run_dir, judges, meta.get("launch_time"), hold=a.hold)
            record = summarize_run(meta, load_metrics(run_dir), watched["judged"], a.warmup_iterations)
            record.update(run_folder_facts(run_dir))
            results["runs"].append(record)
    finally:
        judges.close()
    results["summary"] = mode_summary(results["runs"])
    return results


def run_meta(run_dir: Path) -> dict[str, Any]:
    """What this script recorded at launch, else mode, seed and envs from the run's params/*.yaml."""
    path = run_dir / RUN_META
    if path.exists():
        return json.loads(path.read_text())
    meta: dict[str, Any] = {"mode": "?", "seed": "?", "num_envs": "?", "nproc": 1, "launch_time": None,
                            "run_dir": str(run_dir)}
    try:
        import yaml

        agent = yaml.safe_load((run_dir / "params" / "agent.yaml").read_text())
        env = yaml.safe_load((run_dir / "params" / "env.yaml").read_text())
        meta.update(mode=agent["ppo"]["timeout_bootstrap"], seed=agent["seed"], num_envs=env["num_envs"])
    except (OSError, KeyError, TypeError, ImportError):
        pass
    return meta


def load_results(path: str) -> dict[str, Any]:
    p = Path(path)
    p = p / RESULTS if p.is_dir() else p
    if not p.is_file():
        raise SystemExit(f"error: --table {path}: no {RESULTS} there")
    return json.loads(p.read_text())


def describe(results: dict[str, Any]) -> str:
    m = results.get("machine", {})
    s = results.get("settings", {})
    gate = s.get("gate", {})
    gpus = f"{m['gpu_count']} x {m['gpu']}" if m.get("gpu_count") else "no GPU"
    head = [f"command: {results.get('command', '?')}",
            f"machine: {gpus}, {m.get('cpu_count')} CPUs, torch {m.get('torch')}, python {m.get('python')}"]
    if s.get("sim"):
        head.append(f"training: {s['sim']} on {s['device']}, {s['num_envs']} envs x {s['nproc']} process(es), "
                    f"checkpoint every {s['save_interval']} iterations, budget {s['budget_s']:g} s, Warp kernel "
                    f"cache {s['warp_cache']}; judges: {s['judge_workers']} x {s['judge_threads']} threads"
                    + (f", nice {s['judge_nice']}" if s.get("judge_nice") else "")
                    + (", after each run (the trainer alone)" if s.get("judge_when") == "after" else ""))
    judged = (f"gate = gait acceptance: {gate.get('starts')} envs x 5 s at 0.5 m/s" if gate.get("judge") == "acceptance"
              else f"gate: {gate.get('starts')} starts x {gate.get('horizon_s')} s"
              + (", then the robustness gate (the same, randomized)" if gate.get("judge") == "robust" else ""))
    head.append(f"{judged}, seed {gate.get('seed')}; steady samples/s: median after {s.get('warmup_iterations')} "
                "warm-up iterations; (a) = samples to gate / steady samples/s; (b) = checkpoint written - launch")
    return "\n".join(head)


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    from isaac_adapter.evaluation.gate import GateConfig

    own, extra = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                allow_abbrev=False)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--modes", nargs="+", choices=MODES, default=["exact", "state_value"],
                   help="--timeout-bootstrap values of g1_walk.py: exact (default there), state_value (V(s_t))")
    p.add_argument("--variant", action="append", default=[], metavar="NAME=ARGS",
                   help="a training variant: g1_walk.py flags and overrides added for its runs (repeatable; "
                   "every variant runs every mode and seed), e.g. smooth='--task G1-Walk-Smooth-v0 --symmetry both'")
    p.add_argument("--num-envs", type=int, default=4096,
                   help="envs per process (4096: what the recipe that passed the gate trained with)")
    p.add_argument("--nproc", type=int, default=1, help="processes (GPUs) per run, through torchrun when > 1")
    p.add_argument("--budget-s", type=float, default=600.0, help="wall-clock budget of each run from its launch")
    p.add_argument("--parallel", type=int, default=1,
                   help="trainers at once on the device (> 1: for samples-to-gate studies; the table then shows "
                   "no speeds for those runs, which shared the device)")
    p.add_argument("--save-interval", type=int, default=10, help="checkpoint every this many iterations")
    p.add_argument("--max-iterations", type=int, default=100_000, help="g1_walk.py's iterations (the budget ends runs)")
    p.add_argument("--sim", default="warp", help="g1_walk.py --sim")
    p.add_argument("--device", default="cuda", help="g1_walk.py --device")
    p.add_argument("--validate", action="store_true",
                   help="keep g1_walk.py's per-step env checks (default: --no-validate)")
    p.add_argument("--warp-cache", choices=("cold", "fresh", "shared"), default="cold",
                   help="cold (default): each run compiles its Warp kernels into an empty cache in its run "
                   "folder, so (b) includes the compilation; fresh: the CUDA driver's, Triton's and Inductor's "
                   "caches empty as well, as on a fresh machine; shared: the machine's cache (a warm start)")
    p.add_argument("--trainer-env", action="append", default=[], metavar="NAME=VALUE",
                   help="a variable set for the trainers only (repeatable), e.g. PYTHONPATH for a simulator whose "
                   "packages differ from the ones the judges run MuJoCo with")
    p.add_argument("--out", default="runs/time_to_walk", help="run folders <mode>_s<seed> and time_to_walk.json")
    p.add_argument("--overwrite", action="store_true", help="delete run folders this command would reuse")
    p.add_argument("--judge-workers", type=int, default=4, help="gate processes beside the trainer")
    p.add_argument("--judge-threads", type=int, default=2, help="torch and MuJoCo threads per gate process")
    p.add_argument("--judge-nice", type=int, default=10, choices=range(20), metavar="0-19",
                   help="how much lower the gate processes' scheduling priority is than the trainer's (0: the same)")
    p.add_argument("--judge-when", choices=("during", "after"), default="during",
                   help="during: judge beside the trainer and stop it at the first pass; after: judge once the "
                   "trainer has exited (budget or --max-iterations), so it trains alone")
    p.add_argument("--hold", type=int, default=1, metavar="N",
                   help="go on past the first pass until N checkpoints in a row pass, and report from which "
                   "iteration the gate held (default 1: the first pass ends the run)")
    p.add_argument("--warmup-iterations", type=int, default=5, help="iterations left out of the steady samples/s")
    p.add_argument("--stop-timeout-s", type=float, default=120.0, help="after SIGTERM, SIGKILL a trainer after this")
    p.add_argument("--judge", choices=("gate", "acceptance", "robust"), default="gate",
                   help="what a checkpoint must pass: the walking gate; training's closing gait acceptance "
                        "(0.5 m/s forward, 5 s, no falls, air time, double support, cadence, tracking); or robust: "
                        "the walking gate and then the robustness gate (benchmarks/g1_gate.py --robust)")
    p.add_argument("--acceptance-envs", type=int, default=32, help="--judge acceptance: envs (noisy starts)")
    p.add_argument("--gate-starts", type=int, default=GateConfig.starts, help="the gate's noisy starts per command")
    p.add_argument("--gate-horizon-s", type=float, default=GateConfig.horizon_s)
    p.add_argument("--gate-seed", type=int, default=GateConfig.seed)
    p.add_argument("--table", metavar="PATH", nargs="+", default=None,
                   help=f"re-print the table of OUT or OUT/{RESULTS}; several: one table of all their runs, "
                   "medians over all of them; runs nothing")
    p.add_argument("--group-by", choices=("variant", "mode"), default="variant",
                   help="with --table: take medians per variant/mode (default) or per mode alone, pooling "
                   "variants that train the same task")
    p.add_argument("--judge-only", metavar="RUN_DIR", nargs="+", default=None,
                   help="judge the checkpoints of existing run folders (no training)")
    a = p.parse_args(own)
    a.variants = [parse_variant(v) for v in a.variant] or [("", [])]
    a.trainer_env_vars = dict(parse_env_setting(v) for v in a.trainer_env)
    if len({name for name, _ in a.variants}) != len(a.variants):
        p.error("--variant names must differ")
    if a.judge_workers < 1 or a.judge_threads < 1 or a.nproc < 1 or a.parallel < 1:
        p.error("--judge-workers, --judge-threads, --nproc and --parallel must be >= 1")
    if a.hold < 1:
        p.error(f"--hold {a.hold}: the checkpoints in a row that must pass, >= 1 (1: the first pass ends the run)")
    if a.acceptance_envs < 1:
        p.error("--acceptance-envs must be >= 1")
    return a, extra


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    a, extra = parse_args(argv)
    if a.table:
        # runs of several invocations (one seed each, say) in one table, medians over all of them
        loaded = [load_results(path) for path in a.table]
        for results in loaded:
            print(describe(results))
        print(format_results([run for results in loaded for run in results["runs"]], a.group_by))
        return 0
    if a.judge_only:
        results = judge_only(a.judge_only, a, argv)
    else:
        results = run_benchmark(a, extra, argv)
        print(f"wrote {Path(a.out) / RESULTS}")
    print(describe(results))
    print(format_results(results["runs"]))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
