"""``benchmarks/isaaclab_g1.py flat`` end to end on the CPU: Isaac Lab's own ``Isaac-Velocity-Flat-G1``
through ``Runner`` and through rsl-rl-lib's ``OnPolicyRunner`` on one env, for a few iterations.

The phase otherwise runs only on a GPU machine, for 1,000 iterations; here it is run as a user runs
it, with the probes of rsl_rl's time-out bootstrap and a new order of the samples each epoch, and
its record is read back: both trainers' rows, each naming the device it ran on, Isaac Lab's
per-term episode logs on every 10th row, and the settings the Runner trained with.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("isaaclab_rl")
pytest.importorskip("rsl_rl")

from isaac_adapter.app.bench.isaaclab_flat import RSL_RL, RUNNER, TERMS_EVERY  # noqa: E402
from isaac_adapter.evaluation.gate import GateConfig  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def test_both_trainers_record_their_rows_device_and_terms_and_runner_takes_the_probes(tmp_path):
    iterations = TERMS_EVERY  # the last row keeps the per-term logs
    script = [sys.executable, str(ROOT / "benchmarks" / "isaaclab_g1.py"), "flat", "--device", "cpu",
              "--num-envs", str(GateConfig().num_envs), "--iterations", str(iterations), "--horizon-s", "0.5",
              "--gate-horizon-s", "0.5", "--out", str(tmp_path)]
    probes = ["--timeout-bootstrap", "state_value", "--shuffle", "every_epoch"]
    done = subprocess.run(script + probes, capture_output=True, text=True, timeout=900, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads((tmp_path / "flat.json").read_text())
    runner, rsl = record["trainers"][RUNNER], record["trainers"][RSL_RL]
    assert runner["timeout_bootstrap"] == "state_value" and "timeout_bootstrap" not in rsl
    assert runner["shuffle"] == "every_epoch" and "shuffle" not in rsl
    for trainer in (runner, rsl):
        assert [r["it"] for r in trainer["rows"]] == list(range(1, iterations + 1))
        # each row keeps the learning rate its update left and the mean action std, within the schedule's bounds
        assert all(1e-5 <= r["lr"] <= 1e-2 and 0 < r["action_std"] < 5 for r in trainer["rows"])
        assert {r["device"] for r in trainer["rows"]} == {"cpu"}
        kept = [r for r in trainer["rows"] if "terms" in r]
        assert [r["it"] for r in kept] == [iterations]
        terms = kept[0]["terms"]
        assert "Episode_Reward/feet_air_time" in terms and "Episode_Termination/time_out" in terms
        assert all(k.startswith(("Episode_Reward/", "Episode_Termination/", "Metrics/")) for k in terms)
        assert trainer["judged"][0]["command"] == [0.5, 0.0, 0.0] and "gate" in trainer["judged"][0]
    # the table prints the terms of both, the probe under its own name, and keeps the probe out of the goal
    assert "| Episode_Reward/feet_air_time |" in done.stdout
    table = subprocess.run([*script[:2], "table", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert table.returncode == 0, table.stderr[-2000:]
    assert f"| 0 | Runner, state_value bootstrap, shuffled every_epoch | {iterations} |" in table.stdout
    assert f"| 0 | rsl-rl-lib | {iterations} |" in table.stdout
    assert "no seed has both trainers at the same iterations: no verdict" in table.stdout
    # going on in the same folder with the exact bootstrap is refused in one line, before Isaac Lab starts
    again = subprocess.run(script, capture_output=True, text=True, timeout=120)
    assert again.returncode == 2
    assert again.stderr.strip().splitlines()[-1].endswith("trained Runner with state_value; give the same, or another --out")


def test_no_judge_leaves_the_policies_unjudged_and_the_seed_out_of_the_goal_and_a_later_call_judges_them(tmp_path):
    script = [sys.executable, str(ROOT / "benchmarks" / "isaaclab_g1.py"), "flat", "--device", "cpu",
              "--num-envs", str(GateConfig().num_envs), "--iterations", "2", "--no-judge", "--out", str(tmp_path)]
    done = subprocess.run(script, capture_output=True, text=True, timeout=900, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads((tmp_path / "flat.json").read_text())
    for trainer in (record["trainers"][RUNNER], record["trainers"][RSL_RL]):
        assert [r["it"] for r in trainer["rows"]] == [1, 2] and "judged" not in trainer
    assert record["trainers"][RUNNER]["shuffle"] == "once"  # from_rsl_rl's: rsl-rl-lib's one order per update
    assert not list((tmp_path / "flat_rsl_rl").glob("runner_model_*.pt"))  # nothing converted to be judged
    table = subprocess.run([*script[:2], "table", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert table.returncode == 0, table.stderr[-2000:]
    assert table.stdout.strip().splitlines()[-1] == "left out, fewer than 1,000 iterations: seed 0"
    # a folder brought back from another machine with its record and checkpoints only (no metrics.jsonl), past its
    # deadline: without --judge-last neither trainer runs or is judged, and rsl-rl-lib keeps what the record held of it
    (tmp_path / "flat_ppo_bootstrap" / "metrics.jsonl").unlink()
    later = [*script[:script.index("--iterations")], "--iterations", "4", "--rsl-iterations", "4", "--deadline-s", "0",
             "--out", str(tmp_path)]
    kept = subprocess.run(later, capture_output=True, text=True, timeout=900, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert kept.returncode == 0, kept.stderr[-2000:]
    rsl = json.loads((tmp_path / "flat.json").read_text())["trainers"][RSL_RL]
    assert [r["it"] for r in rsl["rows"]] == [1, 2] and "judged" not in rsl
    # with --judge-last each is judged where it stopped: Runner's rows taken from the record, and rsl-rl-lib's
    # checkpoint judged by its own count though neither its rows file nor the record has a row of it
    (tmp_path / "flat_rsl_rl" / "rows.jsonl").unlink()
    record = json.loads((tmp_path / "flat.json").read_text())
    del record["trainers"][RSL_RL]
    (tmp_path / "flat.json").write_text(json.dumps(record))
    judge = [*later, "--judge-last", "--horizon-s", "0.5", "--gate-horizon-s", "0.5"]
    judged = subprocess.run(judge, capture_output=True, text=True, timeout=900, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert judged.returncode == 0, judged.stderr[-2000:]
    record = json.loads((tmp_path / "flat.json").read_text())
    runner, rsl = record["trainers"][RUNNER], record["trainers"][RSL_RL]
    assert [r["it"] for r in runner["rows"]] == [1, 2] and runner["judged"][0]["command"] == [0.5, 0.0, 0.0]
    assert runner["judged"][0]["checkpoint"].endswith("model_2.pt")
    assert rsl["rows"] == [] and rsl["judged"][0]["checkpoint"].endswith("runner_model_2.pt")
    assert "| rsl_rl | (256, 128, 128), obs norm False | judged only | - |" in judged.stdout
    assert not list((tmp_path / "flat_rsl_rl").glob("model_[34].pt"))  # judged, not trained
