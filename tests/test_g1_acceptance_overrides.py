"""``benchmarks/g1_acceptance.py CHECKPOINT env.KEY=VALUE``: a checkpoint judged under one physics change."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "g1_acceptance.py"
CHECKPOINT = ROOT / "docs" / "checkpoints" / "g1_clock_it1296.pt"


def start(*extra: str) -> subprocess.Popen:
    cmd = [sys.executable, str(SCRIPT), str(CHECKPOINT), "--num-envs", "4", "--horizon-s", "2", *extra]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)


def finish(proc: subprocess.Popen) -> subprocess.CompletedProcess:
    try:
        out, err = proc.communicate(timeout=300)
    finally:
        proc.kill()  # a no-op once it has exited
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def acceptances(*extras: tuple[str, ...]) -> list[subprocess.CompletedProcess]:
    """One run of the script per ``extras`` entry, all started at once: each is mostly its own start-up."""
    procs = [start(*extra) for extra in extras]
    return [finish(proc) for proc in procs]


def fall_rate(out: str) -> float:
    lines = out.splitlines()
    row = lines[next(i for i, line in enumerate(lines) if line.startswith("---")) + 1]  # the row under the header
    return float(row.split()[3].rstrip("%")) / 100


BAD_OVERRIDES = [
    ("env.randomization.kp_scal=[1,1]", "kp_scal"),               # an unknown field, with the one it meant
    ("env.randomization.kp_scale=[1.2,1.1]", "low <= high"),      # a range the config refuses
    ("agent.ppo.gamma=0.9", "env.KEY=VALUE"),                     # not a change of the task
]


@pytest.fixture(scope="module")
def refused() -> dict[str, subprocess.CompletedProcess]:
    """The script on each bad override, the three started together."""
    overrides = [override for override, _ in BAD_OVERRIDES]
    return dict(zip(overrides, acceptances(*[(override,) for override in overrides])))


@pytest.mark.parametrize("override,named", BAD_OVERRIDES)
def test_a_bad_override_is_one_line_before_anything_is_built(override: str, named: str, refused) -> None:
    done = refused[override]
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert named in last and "Traceback" not in done.stderr, done.stderr
    assert "fell" not in done.stdout and "iteration" not in done.stdout  # no env built, nothing judged


def test_a_one_value_range_reaches_the_physics() -> None:
    """The shipped policy stands its 2 s; with every servo at 0.3 of its stiffness no robot can."""
    plain, weak = acceptances((), ("env.randomization.kp_scale=[0.3,0.3]",))
    assert plain.returncode == 0 and weak.returncode == 0, plain.stderr + weak.stderr
    assert "kp_scale=[0.3,0.3]" in weak.stdout.splitlines()[0]
    assert fall_rate(plain.stdout) == 0.0
    assert fall_rate(weak.stdout) == 1.0


def test_a_checkpoint_trained_under_a_rule_above_the_line_is_judged_by_the_line(recording) -> None:
    """A run trained with episodes ended under 0.62 m is judged as the gate judges it: its rollouts
    end under the task's default 0.25 m, and the header says so."""
    from isaac_adapter.tasks.g1_walk import G1WalkConfig

    path = recording(CHECKPOINT, "G1-Walk-Clock-v0", G1WalkConfig(gait_period_s=0.8, train_collapse_height=0.62),
                     "model_7.pt")
    cmd = [sys.executable, str(SCRIPT), str(path), "--num-envs", "2", "--horizon-s", "1"]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    header = done.stdout.splitlines()[0]
    assert "episodes ended under 0.25 m (trained under 0.62 m: the 0.6 m line alone calls falls)" in header, header
