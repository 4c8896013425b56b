"""benchmarks/train_gpu.py --task: the medians of a training process's metrics, and one short CPU run
whose row is checked against the run's own metrics and params."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

from isaac_adapter.app.bench import train_gpu  # noqa: E402

SCRIPT = REPO / "benchmarks" / "train_gpu.py"


def row(iteration: int, sps: float, collect: float, learn: float, ended: float) -> dict:
    return {"iteration": iteration, "perf/steps_per_s": sps, "perf/collection_s": collect,
            "perf/learning_s": learn, "episodes/ended": ended}


def test_task_row_is_the_median_after_the_warmup_iterations():
    # iteration 1 (compilation, graph capture) is slow and left out; rows arrive out of order
    rows = [row(3, 300.0, 0.30, 0.03, 5), row(1, 1.0, 9.0, 9.0, 0), row(4, 200.0, 0.20, 0.02, 7),
            row(2, 100.0, 0.10, 0.01, 6)]
    got = train_gpu.summarize_task_run(rows, warmup=1)
    assert got["steps_per_s"] == 200.0
    assert got["collect_ms"] == pytest.approx(200.0)
    assert got["learn_ms"] == pytest.approx(20.0)
    assert got["ends"] == 6
    assert got["timed_iterations"] == 3
    empty = train_gpu.summarize_task_run(rows, warmup=4)
    assert empty["steps_per_s"] is None and empty["timed_iterations"] == 0


def test_trainer_flags_belong_to_task_runs():
    with pytest.raises(SystemExit):
        train_gpu.parse_args(["--num-envs", "16", "--", "--tf32"])
    with pytest.raises(SystemExit):
        train_gpu.parse_args(["--nproc", "2"])
    a, extra = train_gpu.parse_args(["--task", "G1-Walk-Clock-Fast-v2", "--warmup", "2", "--iterations", "3",
                                     "--", "--symmetry", "both"])
    args = train_gpu.task_args(a, 64, Path("run"), extra)
    # 5 iterations, no checkpoint before the last, the task's own id, the flags after -- last
    assert args[args.index("--max_iterations") + 1] == "5"
    assert int(args[args.index("--save-interval") + 1]) > 5
    assert args[args.index("--task") + 1] == "G1-Walk-Clock-Fast-v2"
    assert args[-2:] == ["--symmetry", "both"]


def test_a_task_row_on_cpu_is_its_runs_own_clock(tmp_path, capsys):
    out, result = tmp_path / "runs", tmp_path / "rows.json"
    cmd = [sys.executable, str(SCRIPT), "--task", "G1-Walk-Clock-Fast-v2", "--sim", "mujoco", "--device", "cpu",
           "--num-envs", "4", "--warmup", "1", "--iterations", "1", "--out", str(out), "--json", str(result),
           "--", "--symmetry", "both"]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    (got,) = json.loads(result.read_text())["results"]
    run = out / "envs_4"
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["iteration"] for m in metrics] == [1, 2]
    timed = metrics[1]
    # the task's agent settings were the ones timed: 12 steps per env (the v2 id's), 4 envs
    assert "num_steps_per_env: 12" in (run / "params" / "agent.yaml").read_text()
    assert got["num_envs"] == 4 and got["timed_iterations"] == 1
    assert got["steps_per_s"] == pytest.approx(12 * 4 / (timed["perf/collection_s"] + timed["perf/learning_s"]))
    assert got["collect_ms"] == pytest.approx(1e3 * timed["perf/collection_s"])
    assert "G1-Walk-Clock-Fast-v2 through examples/g1_walk.py --symmetry both" in done.stdout
    # the saved record re-prints the same header and table (main() ran as a process above, so here in this one)
    capsys.readouterr()
    train_gpu.main(["--table", str(result)])
    again = capsys.readouterr().out
    assert again.strip() and again.strip() in done.stdout


def test_a_failed_task_run_says_why_in_one_line(tmp_path):
    # main() as the script calls it (the test above runs the script as a process); the trainer is a process
    with pytest.raises(SystemExit) as stop:
        train_gpu.main(["--task", "G1-Walk-Nope-v0", "--sim", "mujoco", "--device", "cpu", "--num-envs", "4",
                        "--out", str(tmp_path)])
    last = str(stop.value)
    assert "\n" not in last
    assert last.startswith("error: the 4-env run exited with") and "unknown task 'G1-Walk-Nope-v0'" in last
