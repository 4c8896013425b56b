"""The robustness gate: the walking gate's battery and judgment under the task's randomization
(``gate.robust_gate_config``), its table and verdict, and the ``--robust`` mode of benchmarks/g1_gate.py."""

from __future__ import annotations

import os
import sys

import pytest

from isaac_adapter.evaluation.gate import (
    ROBUST_GATE_RANDOMIZATION,
    GateConfig,
    GateLine,
    GateResult,
    gate_task_config,
    robust_gate_config,
)
from isaac_adapter.tasks.g1_walk.randomization import RandomizationCfg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECKPOINT = os.path.join(ROOT, "docs", "checkpoints", "g1_clock_it1296.pt")


def _result(values: list[float], cfg: GateConfig) -> GateResult:
    """Hand-made lines: falls <= 1, tracking >= 0.9, then four smoothness limits of 0.2."""
    lines = [GateLine("falls (battery, all starts)", values[0], 1, "<="),
             GateLine("tracking perf (battery)", values[1], 0.9, ">=")]
    lines += [GateLine(f"smooth {i}", v, 0.2, "<=") for i, v in enumerate(values[2:])]
    return GateResult(lines, {"forward 0.8": {"falls": values[0], "tracking_perf": values[1]}}, 0, cfg)


@pytest.mark.parametrize("values, passed", [
    ([1, 0.90, 0.2, 0.2, 0.2, 0.2], True),  # every line exactly at its limit
    ([2, 0.95, 0.1, 0.1, 0.1, 0.1], False),  # one fall too many
    ([0, 0.899, 0.1, 0.1, 0.1, 0.1], False),  # tracking just under
    ([0, 0.95, 0.1, 0.1, 0.1, 0.2001], False),  # one smoothness line just over
])
def test_the_verdict_is_every_line_passing(values: list[float], passed: bool) -> None:
    result = _result(values, robust_gate_config(starts=1))
    assert result.passed is passed
    table = result.format()
    assert table.startswith("robust gate: 6 commands x 1 noisy starts")
    assert "randomization: friction 0.4..1.2; link_mass_scale 0.9..1.1; push_interval_s 2..4; push_velocity -0.5..0.5" in table
    assert table.splitlines()[-2].split() == ["robust", "gate", "PASS" if passed else "FAIL"]
    assert [row.split()[-1] for row in table.splitlines()[4:10]] == ["PASS" if line.passed else "FAIL" for line in result.lines]


def test_the_robust_gate_is_the_walking_gate_with_the_randomization_on() -> None:
    robust, walking = robust_gate_config(), GateConfig()
    assert robust.randomization == ROBUST_GATE_RANDOMIZATION and not walking.randomization.enabled
    assert (robust.battery, robust.thresholds, robust.starts) == (walking.battery, walking.thresholds, walking.starts)
    rand = robust.randomization
    assert rand.push_interval_s == (2.0, 4.0) and rand.push_velocity == (-0.5, 0.5)
    assert rand.friction == (0.4, 1.2) and rand.link_mass_scale == (0.9, 1.1) and rand.action_delay_steps == (1, 1)
    assert rand.noisy and not robust.randomization.physics == ()
    # the task the checkpoint is judged on carries the gate's randomization, and the walking gate's is off
    assert gate_task_config(CHECKPOINT, robust).randomization == ROBUST_GATE_RANDOMIZATION
    assert gate_task_config(CHECKPOINT, walking).randomization == RandomizationCfg()
    assert gate_task_config(CHECKPOINT, robust_gate_config(randomization=RandomizationCfg())).randomization == RandomizationCfg()


def test_the_robust_mode_prints_the_table_for_a_shipped_checkpoint(capsys) -> None:
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        import g1_gate
    finally:
        sys.path.remove(os.path.join(ROOT, "benchmarks"))
    rc = g1_gate.main([CHECKPOINT, "--robust", "--starts", "1", "--horizon-s", "0.5", "--physics-threads", "1"])
    out = capsys.readouterr().out
    assert "7 envs, reference physics, randomized" in out and "robust gate: 6 commands x 1 noisy starts x 0.5 s" in out
    verdict = out.splitlines()[[i for i, row in enumerate(out.splitlines()) if row.startswith("robust gate  ")][0]]
    assert rc == (0 if verdict.split()[-1] == "PASS" else 1)
    for name in ("falls (battery, all starts)", "tracking perf (battery)", "roll/pitch rate RMS (rad/s)"):
        assert name in out
