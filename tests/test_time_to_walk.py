"""benchmarks/time_to_walk.py: its bookkeeping against hand-computed values, and one short CPU run."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]

from isaac_adapter.app.bench import time_to_walk as ttw  # noqa: E402

SCRIPT = REPO / "benchmarks" / "time_to_walk.py"


def metric(iteration: int, sps: float, t: float = 0.0, collect: float = 1.0, learn: float = 0.5) -> dict:
    return {"iteration": iteration, "total_steps": iteration * 100, "time": t, "perf/steps_per_s": sps,
            "perf/collection_s": collect, "perf/learning_s": learn}


def line(name: str, value: float, threshold: float, op: str = "<=") -> dict:
    passed = value <= threshold if op == "<=" else value >= threshold
    return {"name": name, "value": value, "threshold": threshold, "op": op, "passed": passed}


def judged(iteration: int, passed: bool, lines: list[dict] | None = None, **extra) -> dict:
    lines = lines if lines is not None else [line("falls", 0 if passed else 3, 1)]
    return {"iteration": iteration, "passed": passed, "failed": [x["name"] for x in lines if not x["passed"]],
            "lines": lines, **extra}


# -- pure bookkeeping ----------------------------------------------------------------------------


def test_steady_median_skips_warmup_and_takes_the_median() -> None:
    # iterations 1-2 are slow (warm-up); the rest, unordered on purpose: 990, 1000, 1010, 1020 -> 1005
    rows = [metric(4, 1020.0), metric(1, 100.0), metric(3, 1000.0), metric(2, 200.0), metric(5, 1010.0),
            metric(6, 990.0)]
    assert ttw.steady_median(rows, warmup=2) == 1005.0
    assert ttw.steady_median(rows, warmup=0) == 995.0  # median of all six: (990 + 1000) / 2
    assert ttw.steady_median(rows[:2], warmup=2) is None


def test_samples_and_measure_a_by_hand() -> None:
    assert ttw.samples(29_589_504, 1) == 29_589_504
    assert ttw.samples(1000, 2) == 2000  # total_steps counts one process of a torchrun run
    assert ttw.measure_a(29_589_504, 427_407.0) == pytest.approx(69.2302, abs=1e-4)
    assert ttw.measure_a(None, 1.0) is None and ttw.measure_a(10, None) is None


def test_first_pass_waits_for_earlier_checkpoints() -> None:
    rows = [judged(10, False), judged(30, True), judged(20, True)]
    assert ttw.first_pass(rows)["iteration"] == 20
    assert ttw.settled_stop(rows, pending=[]) ["iteration"] == 20
    assert ttw.settled_stop(rows, pending=[15]) is None  # 15 may pass too: not settled
    assert ttw.settled_stop(rows, pending=[25, 40])["iteration"] == 20


def test_the_gate_held_is_the_first_run_of_passes_in_a_row() -> None:
    """Seed 31's pattern at the recipe's interval: a pass at 360, fails at 380-420, then passes from
    440 on: held 3 in a row from 440 (confirmed at 480), not from the first pass."""
    passes = {340: False, 360: True, 380: False, 400: False, 420: False, 440: True, 460: True, 480: True, 500: True}
    rows = [judged(it, ok) for it, ok in passes.items()]
    assert ttw.gate_held(rows, 1) == (rows[1], rows[1])
    first, last = ttw.gate_held(rows, 3)
    assert (first["iteration"], last["iteration"]) == (440, 480)
    assert ttw.gate_held(rows, 5) is None  # four in a row at most
    assert ttw.settled_stop(rows, pending=[], hold=3)["iteration"] == 480
    assert ttw.settled_stop(rows, pending=[470], hold=3) is None  # a checkpoint inside the streak is unjudged
    assert ttw.settled_stop(rows, pending=[490], hold=3)["iteration"] == 480


def test_summarize_run_says_where_the_gate_held() -> None:
    launch = 1000.0
    metrics = [metric(i, 1000.0, t=launch + 30.0 + i) for i in range(1, 9)]
    rows = [judged(2, True, written_s=40.0, samples=200), judged(4, False, written_s=45.0, samples=400),
            judged(6, True, written_s=50.0, samples=600), judged(8, True, written_s=55.0, samples=800)]
    meta = {"mode": "exact", "seed": 0, "num_envs": 8, "nproc": 1, "launch_time": launch, "hold": 2}
    r = ttw.summarize_run(meta, metrics, rows, warmup=2)
    assert r["gate_iteration"] == 2 and r["wall_to_gate_s"] == 40.0  # (a) and (b) still at the first pass
    assert (r["held_iteration"], r["held_samples"], r["held_confirmed_iteration"], r["wall_to_held_s"]) == (6, 600, 8, 55.0)
    assert ("exact seed 0: the gate held from iteration 6 (600 samples, (a) 0.6 s): 2 checkpoints in a row passed, "
            "the last at iteration 8, written 55.0 s after launch") in ttw.format_results([r])
    r = ttw.summarize_run({**meta, "hold": 3}, metrics, rows, warmup=2)
    assert r["held_iteration"] is None
    assert "exact seed 0: the gate did not hold for 3 checkpoints in a row" in ttw.format_results([r])
    assert "held_iteration" not in ttw.summarize_run({**meta, "hold": 1}, metrics, rows, warmup=2)
    assert ttw.first_pass([judged(10, False)]) is None


def test_closest_prefers_fewest_failing_lines_then_smallest_shortfall() -> None:
    two_fail = judged(50, False, [line("a", 0.30, 0.21), line("b", 0.22, 0.21)])
    small_miss = judged(20, False, [line("a", 0.22, 0.21), line("perf", 0.95, 0.90, ">=")])
    big_miss = judged(30, False, [line("a", 0.42, 0.21), line("perf", 0.95, 0.90, ">=")])
    assert ttw.shortfall(small_miss["lines"]) == pytest.approx(0.01 / 0.21)
    assert ttw.shortfall(big_miss["lines"]) == pytest.approx(1.0)
    assert ttw.closest([two_fail, big_miss, small_miss])["iteration"] == 20
    assert ttw.closest([]) is None


def test_judged_row_counts_every_process() -> None:
    result = {"passed": True, "total_steps": 393_216, "world_size": 2, "judge_s": 9.5,
              "lines": [line("falls", 0, 1)], "per_command": {}}
    row = ttw.judged_row(10, "model_10.pt", 42.0, result)
    assert row["samples"] == 786_432 and row["passed"] and row["failed"] == [] and row["written_s"] == 42.0
    broken = ttw.judged_row(20, "model_20.pt", 50.0, {"passed": True, "error": "CheckpointError: damaged"})
    assert not broken["passed"] and broken["error"].startswith("CheckpointError")


def test_summarize_run_reached() -> None:
    launch = 1000.0
    metrics = [metric(i, sps, t=launch + 30.0 + i, collect=0.5, learn=0.25)
               for i, sps in enumerate([100.0, 200.0, 900.0, 1000.0, 1100.0, 1000.0], start=1)]
    rows = [judged(2, False, written_s=40.0, samples=200), judged(4, True, written_s=45.0, samples=400),
            judged(6, True, written_s=50.0, samples=600)]
    meta = {"mode": "exact", "seed": 0, "num_envs": 8, "nproc": 1, "launch_time": launch}
    r = ttw.summarize_run(meta, metrics, rows, warmup=2)
    assert r["steady_steps_per_s"] == 1000.0  # median of 900, 1000, 1100, 1000
    assert r["reached"] and r["gate_iteration"] == 4 and r["samples_to_gate"] == 400
    assert r["measure_a_s"] == pytest.approx(0.4)  # 400 samples / 1000 samples/s
    assert r["wall_to_gate_s"] == 45.0
    assert r["first_iteration_s"] == pytest.approx(31.0)  # iteration 1 logged at launch + 31 s
    assert r["train_s_to_gate"] == pytest.approx(3.0)  # 4 iterations x 0.75 s
    assert r["iterations"] == 6 and r["closest"] is None
    assert r["collection_s"] == 0.5 and r["learning_s"] == 0.25
    assert "exact seed 0: per iteration (steady medians) collection 0.500 s, learning 0.250 s" in \
        ttw.format_results([r])


def test_last_failures_say_which_line_held_the_run_back() -> None:
    rows = [judged(30, False, [line("falls", 0, 1), line("smooth", 0.3, 0.2)]),
            judged(10, False, [line("falls", 3, 1), line("smooth", 0.1, 0.2)]),  # out of order on purpose
            judged(20, False, [line("falls", 2, 1), line("smooth", 0.5, 0.2)]),
            judged(40, True, [line("falls", 0, 1), line("smooth", 0.2, 0.2)]),
            {"iteration": 50, "passed": False, "failed": [], "lines": [], "error": "damaged"}]
    assert ttw.last_failures(rows) == {"falls": 20, "smooth": 30}
    assert ttw.last_failures([judged(5, True, [line("falls", 0, 1)])]) == {"falls": None}
    text = ttw.format_results([dict(record("exact", 0, True, 1.0, 2.0, 10), judged=rows)])
    assert "exact seed 0: last judged iteration each gate line failed: falls 20; smooth 30" in text


def test_the_update_before_any_judging_and_the_kl_are_told_apart() -> None:
    """Up to the first checkpoint no judge shares the CPU: the trainer's update time and speed there
    are its own, and (a) at that speed is told apart from (a) at the whole run's."""
    metrics = [dict(metric(i, 1000.0 if i <= 4 else 800.0, learn=0.04 if i <= 4 else 0.06), **{"policy/kl": 0.01 * i})
               for i in range(1, 9)]
    meta = {"mode": "exact", "seed": 3, "num_envs": 8, "nproc": 1, "launch_time": None}
    r = ttw.summarize_run(meta, metrics, [judged(6, True, samples=4000, written_s=9.0), judged(4, False)], warmup=1)
    assert r["learning_s_unjudged"] == 0.04  # iterations 2-4: the first checkpoint judged is 4
    assert r["steady_steps_per_s_unjudged"] == 1000.0
    assert r["learning_s"] == 0.06  # median of 0.04 x 3 and 0.06 x 4
    assert r["steady_steps_per_s"] == 800.0
    assert r["measure_a_s"] == 5.0 and r["measure_a_unjudged_s"] == 4.0  # 4000 samples / 800 and / 1000
    assert r["kl"] == pytest.approx(0.05)  # median of 0.02 ... 0.08
    assert ("exact seed 3: per iteration (steady medians) collection 1.000 s, learning 0.060 s "
            "(0.040 s up to the first checkpoint, before any judging); KL 0.0500; before any judging "
            "1,000 samples/s, (a) at that rate 4.0 s\n") in ttw.format_results([r]) + "\n"
    unjudged = ttw.summarize_run(meta, [metric(i, 1000.0, learn=0.05) for i in range(1, 5)], [], warmup=1)
    assert unjudged["learning_s_unjudged"] == unjudged["learning_s"] == 0.05 and unjudged["kl"] is None
    assert "learning 0.050 s (0.050 s up to the first checkpoint, before any judging); before any judging " \
        "1,000 samples/s\n" in ttw.format_results([unjudged]) + "\n"
    assert ttw.mode_summary([r, unjudged])[0]["measure_a_unjudged_s"] == math.inf  # one of two missed: inf
    assert ttw.mode_summary([r])[0]["measure_a_unjudged_s"] == 4.0
    assert "; (a) at the speeds before any judging 4.0 s" in ttw.format_results([r])
    older = {k: v for k, v in r.items() if k not in ("steady_steps_per_s_unjudged", "measure_a_unjudged_s")}
    assert ttw.mode_summary([older])[0]["measure_a_unjudged_s"] is None
    assert "before any judging" not in ttw.format_results([older]).splitlines()[-1]
    # judged after the run: no iteration shared the CPU with a judge
    after = ttw.summarize_run({**meta, "judge_when": "after"}, metrics, [judged(6, True, samples=4000, written_s=9.0)], warmup=1)
    assert after["learning_s_unjudged"] == after["learning_s"] == 0.06
    assert after["measure_a_unjudged_s"] == after["measure_a_s"] == 5.0
    assert ("exact seed 3: per iteration (steady medians) collection 1.000 s, learning 0.060 s (judged after the "
            "run: the trainer alone); KL 0.0500\n") in ttw.format_results([after]) + "\n"


def test_summarize_run_not_reached_keeps_the_closest() -> None:
    rows = [judged(2, False, [line("a", 0.5, 0.2), line("b", 0.5, 0.2)], written_s=1.0, samples=2),
            judged(4, False, [line("a", 0.3, 0.2), line("b", 0.1, 0.2)], written_s=2.0, samples=4)]
    meta = {"mode": "state_value", "seed": 1, "num_envs": 8, "nproc": 1, "launch_time": None}
    r = ttw.summarize_run(meta, [metric(1, 10.0)], rows, warmup=5)
    assert not r["reached"] and r["gate_iteration"] is None and r["measure_a_s"] is None
    assert r["steady_steps_per_s"] is None and r["first_iteration_s"] is None
    assert r["closest"]["iteration"] == 4 and r["closest"]["failed"] == ["a"]


def record(mode: str, seed: int, reached: bool, a: float | None, b: float | None, samples: int | None,
           sps: float = 1000.0) -> dict:
    return {"mode": mode, "seed": seed, "num_envs": 16384, "nproc": 1, "reached": reached,
            "gate_iteration": 300 if reached else None, "samples_to_gate": samples, "steady_steps_per_s": sps,
            "measure_a_s": a, "wall_to_gate_s": b, "first_iteration_s": 20.0, "iterations": 400, "judged": [],
            "budget_s": 600, "closest": None}


def test_mode_summary_counts_misses_as_infinitely_long() -> None:
    records = [record("exact", 0, True, 60.0, 200.0, 60_000), record("exact", 1, True, 80.0, 240.0, 80_000),
               record("exact", 2, False, None, None, None),
               record("state_value", 0, True, 70.0, 210.0, 70_000), record("state_value", 1, False, None, None, None)]
    exact, state_value = ttw.mode_summary(records)
    assert exact["mode"] == "exact" and exact["reached"] == 2 and exact["runs"] == 3
    assert exact["measure_a_s"] == 80.0 and exact["wall_to_gate_s"] == 240.0 and exact["samples_to_gate"] == 80_000
    assert math.isinf(state_value["measure_a_s"])  # 1 of 2 reached: the median is past the budget
    text = ttw.format_results(records)
    assert "exact: reached 2/3" in text and "(a) 80.0 s (of the medians 80.0 s), (b) 240.0 s" in text
    assert "state_value: reached 1/2" in text and "(a) not reached" in text
    assert "exact seed 2: not reached in 600 s" in text
    records[0]["judged"] = [{"iteration": 10, "passed": False, "error": "CheckpointError: damaged"}]
    assert "exact seed 0: 1 checkpoint(s) could not be judged" in ttw.format_results(records)


def test_variants_are_compared_apart() -> None:
    smooth = [dict(record("exact", seed, True, 50.0 + seed, 150.0, 50_000), variant="smooth") for seed in (0, 1)]
    clock = [dict(record("exact", 0, False, None, None, None), variant="clock")]
    summaries = ttw.mode_summary([*smooth, *clock])
    assert [s["mode"] for s in summaries] == ["smooth/exact", "clock/exact"]
    assert summaries[0]["reached"] == 2 and summaries[0]["measure_a_s"] == 50.5  # median of 50 and 51
    assert math.isinf(summaries[1]["measure_a_s"])
    assert ttw.table_rows(clock)[0][0] == "clock/exact"
    assert "clock/exact seed 0: not reached in 600 s" in ttw.format_results(clock)


def test_group_by_mode_pools_variants() -> None:
    # a ramp given on the command line (variant "cramp") and the task id that presets it (no variant)
    cli = [dict(record("exact", seed, True, 300.0 + 20 * seed, 330.0, 60_000), variant="cramp") for seed in (0, 1)]
    task_id = [record("exact", 2, True, 280.0, 450.0, 62_000), record("state_value", 0, True, 440.0, 600.0, 55_000)]
    by_mode = ttw.mode_summary([*cli, *task_id], by="mode")
    assert [(s["mode"], s["runs"]) for s in by_mode] == [("exact", 3), ("state_value", 1)]
    assert by_mode[0]["measure_a_s"] == 300.0  # median of 280, 300, 320
    assert [s["mode"] for s in ttw.mode_summary([*cli, *task_id])] == ["cramp/exact", "exact", "state_value"]
    text = ttw.format_results([*cli, *task_id], by="mode")
    assert "exact: reached 3/3" in text and "state_value: reached 1/1" in text
    assert [row[0] for row in ttw.table_rows(cli)] == ["cramp/exact", "cramp/exact"]  # rows keep their own label


def test_variant_parsing_and_run_folders() -> None:
    name, args = ttw.parse_variant("smooth=--task G1-Walk-Smooth-v0 env.rewards.action_rate=-0.1 --symmetry both")
    assert name == "smooth" and args == ["--task", "G1-Walk-Smooth-v0", "env.rewards.action_rate=-0.1", "--symmetry", "both"]
    assert ttw.parse_variant("plain=") == ("plain", [])
    assert ttw.run_name((name, args), "exact", 2) == "smooth_exact_s2"
    assert ttw.run_name(("", []), "state_value", 0) == "state_value_s0"
    for bad in ("no-equals", "=--task x", "a/b=--task x"):
        with pytest.raises(SystemExit, match="expected NAME=ARGS"):
            ttw.parse_variant(bad)
    a, extra = ttw.parse_args(["--variant", "a=--task G1-Walk-v0", "--variant", "b=", "--", "--num-steps-per-env", "32"])
    assert a.variants == [("a", ["--task", "G1-Walk-v0"]), ("b", [])] and extra == ["--num-steps-per-env", "32"]
    assert ttw.parse_args([])[0].variants == [("", [])]
    with pytest.raises(SystemExit):
        ttw.parse_args(["--variant", "a=", "--variant", "a=--task G1-Walk-v0"])


def test_each_run_compiles_into_its_own_empty_warp_cache_by_default(tmp_path: Path, monkeypatch) -> None:
    """(b) counts Warp's compilation: by default every trainer gets a kernel cache folder of its own,
    inside its run folder (empty, since the folder is new); --warp-cache fresh gives it the driver's,
    Triton's and Inductor's caches there too; --warp-cache shared keeps the machine's."""
    monkeypatch.setenv("WARP_CACHE_PATH", "/the/machine/cache")
    default, _ = ttw.parse_args([])
    env = ttw.trainer_env(default.warp_cache, tmp_path / "exact_s0")
    assert default.warp_cache == "cold" and env["WARP_CACHE_PATH"] == str((tmp_path / "exact_s0" / "warp_cache").resolve())
    fresh, _ = ttw.parse_args(["--warp-cache", "fresh"])
    cold_as_a_fresh_machine = ttw.trainer_env(fresh.warp_cache, tmp_path / "exact_s0")
    assert cold_as_a_fresh_machine["WARP_CACHE_PATH"] == env["WARP_CACHE_PATH"]
    for name in ("CUDA_CACHE_PATH", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR"):
        assert cold_as_a_fresh_machine[name].startswith(str((tmp_path / "exact_s0").resolve()))
        assert env.get(name) == os.environ.get(name)  # cold leaves the machine's other caches alone
    assert len({cold_as_a_fresh_machine[name] for name in ttw.FRESH_CACHES} | {env["WARP_CACHE_PATH"]}) == 4
    shared, _ = ttw.parse_args(["--warp-cache", "shared"])
    assert ttw.trainer_env(shared.warp_cache, tmp_path / "exact_s0")["WARP_CACHE_PATH"] == "/the/machine/cache"
    assert env["PYTHONUNBUFFERED"] == "1"


def test_trainer_env_overrides_reach_the_trainer_alone(tmp_path: Path, monkeypatch) -> None:
    """--trainer-env sets variables for the trainers only (Isaac Lab's packages beside the judges'
    MuJoCo); the benchmark's own environment, which the judge processes inherit, keeps its value."""
    monkeypatch.setenv("PYTHONPATH", "/judges/site")
    a, _ = ttw.parse_args(["--trainer-env", "PYTHONPATH=/isaac/site", "--trainer-env", "EMPTY="])
    env = ttw.trainer_env(a.warp_cache, tmp_path / "exact_s0", a.trainer_env_vars)
    assert env["PYTHONPATH"] == "/isaac/site" and env["EMPTY"] == "" and env["PYTHONUNBUFFERED"] == "1"
    assert os.environ["PYTHONPATH"] == "/judges/site"
    for bad in ("PYTHONPATH", "1X=2", "=v"):
        with pytest.raises(SystemExit, match="--trainer-env"):
            ttw.parse_args(["--trainer-env", bad])


def test_table_rows() -> None:
    rows = ttw.table_rows([record("exact", 0, True, 69.23, 201.5, 29_589_504, 427_407.4)])
    assert rows == [["exact", "0", "16384", "300", "29,589,504", "427,407", "69.2", "201.5", "20.0"]]
    two = dict(record("exact", 0, False, None, None, None), nproc=2)
    assert ttw.table_rows([two])[0][2:5] == ["2x16384", "not reached", "-"]
    assert ttw.trainer_command("py", 2, ["--seed", "0"])[:6] == ["py", "-m", "torch.distributed.run", "--standalone",
                                                                "--nproc-per-node", "2"]


# -- the judge loop, with a stand-in trainer and gate -------------------------------------------

FAKE_TRAINER = """
import os, signal, sys, time
from pathlib import Path
run_dir, stop = Path(sys.argv[1]), []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
it = 0
while not stop and it < 2000:
    time.sleep(0.05)
    it += 1
    if it % 10 == 0:
        (run_dir / ".tmp").write_text(str(it))
        os.replace(run_dir / ".tmp", run_dir / f"model_{it}.pt")
(run_dir / f"model_{it}.pt").write_text(str(it))  # the save on SIGTERM
"""


class FakeJudges:
    """Judges in threads: a checkpoint passes from iteration ``passes_from`` on; the judgment of
    ``slow`` waits until ``model_<slow + 10>.pt`` exists and then half a second more."""

    def __init__(self, passes_from: int | None, slow: int | None = None) -> None:
        self.passes_from, self.slow = passes_from, slow
        self.pool = ttw.cf.ThreadPoolExecutor(4)

    def submit(self, path: Path):
        it = int(path.stem.split("_")[1])
        passed = self.passes_from is not None and it >= self.passes_from

        def judge() -> dict:
            if it == self.slow:
                while not (path.parent / f"model_{it + 10}.pt").exists():
                    ttw.time.sleep(0.02)
                ttw.time.sleep(0.5)
            return {"passed": passed, "total_steps": it * 100, "world_size": 1,
                    "lines": [line("falls", 0 if passed else 3, 1)]}

        return self.pool.submit(judge)


def start_fake(tmp_path: Path) -> tuple[Path, ttw.Trainer]:
    script = tmp_path / "fake_trainer.py"
    script.write_text(FAKE_TRAINER)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    return run_dir, ttw.Trainer([sys.executable, str(script), str(run_dir)], tmp_path / "train.log", dict(os.environ))


def test_watch_stops_the_trainer_at_the_first_pass_once_earlier_ones_are_judged(tmp_path: Path) -> None:
    # 20 passes but its judgment ends after 30's, which passes too: 20 must still be the first pass
    run_dir, trainer = start_fake(tmp_path)
    judges = FakeJudges(passes_from=20, slow=20)
    watched = ttw.watch(run_dir, judges, trainer.launch_time, trainer, budget_s=60, stop_timeout=10, poll_s=0.05)
    assert trainer.stop(10) == 0  # it saved on SIGTERM and exited
    assert watched["stop"] == "gate passed"
    assert ttw.first_pass(watched["judged"])["iteration"] == 20
    assert [r["iteration"] for r in watched["judged"]] == [10, 20, 30]  # nothing after the pass is judged
    assert 0 < watched["judged"][0]["written_s"] < watched["judged"][1]["written_s"]


def test_watch_with_hold_goes_on_past_the_first_pass_until_the_gate_holds(tmp_path: Path) -> None:
    """--hold 3: a pass at 20, a fail at 30, passes from 40: the trainer is stopped once 40, 50 and 60
    have passed, every checkpoint up to 60 judged and nothing after it."""
    run_dir, trainer = start_fake(tmp_path)

    class Flaky(FakeJudges):
        def submit(self, path: Path):
            self.passes_from = 20 if int(path.stem.split("_")[1]) != 30 else None
            return super().submit(path)

    watched = ttw.watch(run_dir, Flaky(passes_from=20), trainer.launch_time, trainer, budget_s=60, stop_timeout=10,
                        poll_s=0.05, hold=3)
    assert trainer.stop(10) == 0
    assert watched["stop"] == "gate passed"
    assert [(r["iteration"], r["passed"]) for r in watched["judged"]] == [
        (10, False), (20, True), (30, False), (40, True), (50, True), (60, True)]
    first, last = ttw.gate_held(watched["judged"], 3)
    assert (first["iteration"], last["iteration"]) == (40, 60)


def test_watch_ends_at_the_budget_and_judges_the_last_save(tmp_path: Path) -> None:
    run_dir, trainer = start_fake(tmp_path)
    watched = ttw.watch(run_dir, FakeJudges(passes_from=None), trainer.launch_time, trainer, budget_s=1.2,
                        stop_timeout=10, poll_s=0.05)
    assert trainer.stop(10) == 0
    assert watched["stop"] == "budget"
    assert [r["iteration"] for r in watched["judged"]] == list(ttw.checkpoints(run_dir))
    assert not any(r["passed"] for r in watched["judged"])


def test_watch_judges_after_the_run_and_keeps_the_first_pass(tmp_path: Path) -> None:
    """--judge-when after: no checkpoint is judged while the trainer runs; the run ends at its budget
    (it cannot stop at a pass it has not seen), and the first pass is still the earliest passing save."""
    run_dir, trainer = start_fake(tmp_path)

    class AfterJudges(FakeJudges):
        def submit(self, path: Path):
            self.trainer_running.append(trainer.poll() is None)
            return super().submit(path)

    judges = AfterJudges(passes_from=20)
    judges.trainer_running = []
    watched = ttw.watch(run_dir, judges, trainer.launch_time, trainer, budget_s=3.0, stop_timeout=10, poll_s=0.05,
                        judge_after=True)
    assert trainer.stop(10) == 0
    assert watched["stop"] == "budget"
    assert judges.trainer_running and not any(judges.trainer_running)
    saved = list(ttw.checkpoints(run_dir))
    assert saved[:2] == [10, 20] and len(saved) >= 3  # it trained past the pass
    assert ttw.first_pass(watched["judged"])["iteration"] == 20
    assert [r["iteration"] for r in watched["judged"]][:2] == [10, 20]


# -- the script ----------------------------------------------------------------------------------


def run_script(*args: str, timeout: float = 120.0) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout,
                          cwd=REPO, env=env)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message of a machine without CUDA")
def test_missing_cuda_is_one_line(tmp_path: Path) -> None:
    out = run_script("--device", "cuda", "--out", str(tmp_path / "ttw"), timeout=60)
    assert out.returncode != 0
    assert out.stderr.strip() == "error: --device cuda requested but torch.cuda.is_available() is False"


def test_two_processes_train_under_torchrun_and_count_the_samples_of_both(tmp_path: Path) -> None:
    """--nproc 2 (the 2-GPU command, here two CPU processes): the trainer runs under torchrun, and a
    checkpoint's samples are its per-process env steps (8 envs x 24 steps per iteration) times the
    world size the checkpoint itself recorded."""
    out_dir = tmp_path / "ttw"
    out = run_script("--device", "cpu", "--sim", "mujoco", "--num-envs", "8", "--nproc", "2", "--seeds", "0",
                     "--modes", "exact", "--budget-s", "25", "--save-interval", "10", "--judge-workers", "1",
                     "--judge-threads", "1", "--warmup-iterations", "2", "--out", str(out_dir),
                     "--", "--task", "G1-Walk-Clock-v0", "--torch-threads", "1", timeout=180)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    (run,) = json.loads((out_dir / "time_to_walk.json").read_text())["runs"]
    assert run["nproc"] == 2 and run["trainer_command"][1:6] == ["-m", "torch.distributed.run", "--standalone",
                                                                 "--nproc-per-node", "2"]
    assert run["judged"] and [r["iteration"] for r in run["judged"]] == run["checkpoints_written"]
    for row in run["judged"]:
        assert row["world_size"] == 2 and row["total_steps"] == row["iteration"] * 8 * 24
        assert row["samples"] == 2 * row["total_steps"]
    assert "machine: no GPU," in out.stdout
    assert any(line.split()[:3] == ["exact", "0", "2x8"] for line in out.stdout.splitlines())  # envs: 2 x 8


def test_trainer_exiting_early_is_reported_with_its_log(tmp_path: Path) -> None:
    # main() as the script calls it (the runs below start the script as a process); the trainer is one
    with pytest.raises(SystemExit) as stop:
        ttw.main(["--device", "cpu", "--sim", "mujoco", "--num-envs", "8", "--seeds", "0", "--modes", "exact",
                  "--judge-workers", "1", "--judge-threads", "1", "--out", str(tmp_path / "ttw"),
                  "--", "--task", "No-Such-Task"])
    first, *tail = str(stop.value).strip().splitlines()
    assert first.startswith("error: examples/g1_walk.py (exact, seed 0) exited with status")
    assert any("No-Such-Task" in x for x in tail)  # the trainer's own error line, from its log


def test_short_cpu_run_judges_every_checkpoint(tmp_path: Path, capsys) -> None:
    """A few seconds of CPU training: every checkpoint is judged, the untrained policy fails the gate."""
    out_dir = tmp_path / "ttw"
    budget = 20  # about four times the first iteration's time from launch on two cores: room for a loaded machine
    out = run_script("--device", "cpu", "--sim", "mujoco", "--num-envs", "8", "--seeds", "0", "--modes", "exact",
                     "--budget-s", str(budget), "--save-interval", "10", "--judge-workers", "1", "--judge-threads",
                     "1", "--warmup-iterations", "2", "--out", str(out_dir), "--", "--task", "G1-Walk-Clock-v0",
                     "--torch-threads", "1")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    results = json.loads((out_dir / "time_to_walk.json").read_text())
    assert {"command", "machine", "settings", "runs", "summary"} <= set(results)
    assert results["machine"]["cpu_count"] == os.cpu_count()
    assert results["command"].startswith("python benchmarks/time_to_walk.py --device cpu")
    (run,) = results["runs"]
    assert run["mode"] == "exact" and run["seed"] == 0 and run["num_envs"] == 8
    assert run["stop"] == "budget" and not run["reached"] and run["gate_iteration"] is None
    written = sorted(int(p.stem.split("_")[1]) for p in (out_dir / "exact_s0").glob("model_*.pt"))
    assert written and run["checkpoints_written"] == written
    assert [r["iteration"] for r in run["judged"]] == written  # the final save on SIGTERM included
    for row in run["judged"]:
        assert not row["passed"] and "error" not in row and row["failed"]
        assert row["samples"] == row["iteration"] * 8 * 24
        assert 0 < row["written_s"] < budget + 60
    assert run["steady_steps_per_s"] > 0 and 0 < run["first_iteration_s"] < budget
    # the trainer's own startup split, read from its log: all of it before its first iteration ended
    startup = run["startup_s"]
    assert set(startup) == {"setup", "env", "learner"} and startup["setup"] > 0 and startup["env"] > 0
    assert sum(startup.values()) < run["first_iteration_s"]
    assert f"exact seed 0: startup {startup['setup']:.1f} s to import and configure" in out.stdout
    assert run["closest"]["iteration"] in written
    assert "not reached" in out.stdout and "exact: reached 0/1" in out.stdout

    # --table re-prints from the saved record alone; the script above already ran main() as a process,
    # so the re-prints call it here
    capsys.readouterr()
    assert ttw.main(["--table", str(out_dir)]) == 0
    again = capsys.readouterr().out
    assert "exact: reached 0/1" in again
    assert ttw.format_results(results["runs"]) in again

    # two result files (say, one seed each) print as one table with medians over both
    other = tmp_path / "other.json"
    twin = dict(results["runs"][0], seed=7)
    other.write_text(json.dumps({**results, "runs": [twin]}))
    assert ttw.main(["--table", str(out_dir), str(other)]) == 0
    both = capsys.readouterr().out
    assert "exact: reached 0/2" in both
    assert both.count("command: python benchmarks/time_to_walk.py --device cpu") == 2
    assert ttw.format_results([*results["runs"], twin]) in both


def test_runs_that_shared_the_device_count_for_samples_not_for_speed() -> None:
    alone = [record("exact", seed, True, 300.0 + seed, 330.0, 60_000 + seed, sps=1000.0 + 2000.0 * seed)
             for seed in (0, 1)]
    shared = [dict(record("exact", seed, True, 900.0, 990.0, 50_000, sps=10.0), parallel=3, speed_comparable=False)
              for seed in (2, 3, 4)]
    (summary,) = ttw.mode_summary([*alone, *shared])
    assert summary["runs"] == 5 and summary["timed_runs"] == 2
    assert summary["samples_to_gate"] == 50_000  # median of all five
    assert summary["measure_a_s"] == 300.5 and summary["wall_to_gate_s"] == 330.0  # the two alone only
    assert summary["steady_steps_per_s"] == 2000.0  # median of 1,000 and 3,000; the shared speeds left out
    assert summary["measure_a_of_medians_s"] == 25.0  # 50,000 samples / 2,000 samples/s
    assert "(of the medians 25.0 s)" in ttw.format_results([*alone, *shared])
    # a cold solo run that missed its budget: the samples of the shared runs still meet its speed
    missed = dict(record("exact", 0, False, None, None, None, sps=4000.0))
    (cold,) = ttw.mode_summary([missed, *shared[:2]])
    assert cold["samples_to_gate"] == 50_000 and math.isinf(cold["measure_a_s"])
    assert cold["measure_a_of_medians_s"] == 12.5
    (none_reached,) = ttw.mode_summary([missed])
    assert math.isinf(none_reached["measure_a_of_medians_s"])
    row = ttw.table_rows(shared[:1])[0]
    assert row[4] == "50,000" and row[5:] == ["shared (3 at once)", "-", "-", "-"]
    assert "(speeds of the 2 run(s) alone on the device)" in ttw.format_results([*alone, *shared])


def test_parallel_runs_start_together_and_are_marked(tmp_path: Path) -> None:
    out_dir = tmp_path / "ttw"
    # two trainers share two cores: the first iteration comes 5-6 s after launch, 10 s on a loaded
    # machine, so the budget leaves room for the checkpoint at iteration 10 after a slow start
    budget = 20
    out = run_script("--device", "cpu", "--sim", "mujoco", "--num-envs", "8", "--seeds", "0", "1", "--modes", "exact",
                     "--parallel", "2", "--budget-s", str(budget), "--save-interval", "10", "--judge-workers", "1",
                     "--judge-threads", "1", "--warmup-iterations", "2", "--out", str(out_dir), "--", "--torch-threads", "1")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    runs = json.loads((out_dir / "time_to_walk.json").read_text())["runs"]
    assert [r["seed"] for r in runs] == [0, 1]  # in the order of the runs, whichever ended first
    assert all(r["parallel"] == 2 and not r["speed_comparable"] and r["stop"] == "budget" for r in runs)
    # both trainers were launched before either budget ran out: they ran at the same time
    assert abs(runs[0]["launch_time"] - runs[1]["launch_time"]) < budget
    assert all(r["judged"] and r["checkpoints_written"] for r in runs)
    assert "shared (2 at once)" in out.stdout


def test_judges_run_below_the_trainers_priority() -> None:
    """The gate processes take the CPU only when the trainer, whose host thread feeds the GPU, does not."""
    base = os.nice(0)
    # both pools at once: their worker processes start side by side
    judges, plain = ttw.Judges(1, 1, {}, nice=7), ttw.Judges(1, 1, {})
    try:
        lowered, same = judges.pool.submit(os.nice, 0), plain.pool.submit(os.nice, 0)
        assert lowered.result(timeout=120) == min(base + 7, 19)
        assert same.result(timeout=120) == base
    finally:
        judges.close()
        plain.close()
    assert os.nice(0) == base  # this process keeps its own


def test_judge_acceptance_judges_the_closing_gait_acceptance() -> None:
    """--judge acceptance: the checkpoint passes when training's closing gait acceptance does."""
    shipped = str(Path(__file__).resolve().parents[1] / "docs" / "checkpoints" / "g1_clock_it1296.pt")
    a = ttw.parse_args(["--judge", "acceptance", "--acceptance-envs", "2"])[0]
    settings = ttw.gate_settings(a)
    assert settings == {"judge": "acceptance", "starts": 2, "seed": 0}
    row = ttw.judge_checkpoint(shipped, settings, threads=1)
    assert row["passed"] and row["iteration"] == 1296 and "error" not in row
    assert [line["name"] for line in row["lines"]][0] == "falls (all envs)" and row["lines"][0]["value"] == 0


def test_judge_robust_adds_the_robustness_gate_only_after_the_walking_gate_passes() -> None:
    """--judge robust: the walking gate first; its pass runs the robustness gate, whose lines follow,
    prefixed; the checkpoint passes when both do. A failed walking gate is the record as it is."""
    a = ttw.parse_args(["--judge", "robust", "--gate-starts", "2"])[0]
    assert ttw.gate_settings(a) == {"judge": "robust", "starts": 2, "horizon_s": 20.0, "seed": 0}

    def result(passed: bool, name: str) -> dict:
        return {"passed": passed, "per_command": {"forward": {"falls": 0.0}},
                "lines": [{"name": name, "value": 1.0, "threshold": 0.0, "op": "<=", "passed": passed}]}

    calls = []

    def robust(passed: bool):
        def run() -> dict:
            calls.append(passed)
            return result(passed, "falls (all envs)")
        return run

    failed = result(False, "falls (all envs)")
    assert ttw.with_robust_gate(failed, robust(True)) is failed and calls == []
    both = ttw.with_robust_gate(result(True, "falls (all envs)"), robust(True))
    assert both["passed"] and calls == [True]
    assert [line["name"] for line in both["lines"]] == ["falls (all envs)", "robust: falls (all envs)"]
    assert set(both["per_command"]) == {"forward", "robust: forward"}
    walks_only = ttw.with_robust_gate(result(True, "falls (all envs)"), robust(False))
    assert not walks_only["passed"] and calls == [True, False]
    assert [line["passed"] for line in walks_only["lines"]] == [True, False]
    # the record's first checkpoint whose walking lines all passed, whatever its robust lines said
    rows = [{"iteration": 40, "lines": failed["lines"]}, {"iteration": 60, "lines": walks_only["lines"]},
            {"iteration": 80, "lines": both["lines"]}]
    assert ttw.walking_first_pass(rows)["iteration"] == 60
    assert ttw.walking_first_pass(rows[:1] + [{"iteration": 60, "lines": result(True, "falls (all envs)")["lines"]}]) is None
