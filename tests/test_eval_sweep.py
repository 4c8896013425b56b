"""Post-hoc fall judgment and the threshold sweep, on synthetic traces with hand-derived answers."""

from __future__ import annotations

import math

import pytest
import torch

from isaac_adapter.evaluation.judge import FALL, SURVIVED, TIMEOUT, ThresholdSet, judge_falls
from isaac_adapter.evaluation.sweep import format_sweep_table, sweep
from isaac_adapter.evaluation.synthetic import make_trace
from isaac_adapter.tasks.g1_walk.causes import CAUSE_NAMES

DT = 0.02
TRAIN = ThresholdSet("train rule 0.25 m", eval_success_height=0.25)


def sweep_trace():
    """5 envs, 100 steps (2 s). Step t ends at (t + 1) * 0.02 s.

    env 0: 0.75 m, 0.55 from step 30, 0.47 from 40, 0.40 from 50, 0.20 at 60 where the env terminates.
    env 1: 0.48 m from step 20 on, never ends.    env 2: upright, timeout at step 79.
    env 3: upright, tilt 0.9 at steps 10-12 (inside the 0.4 s tilt grace), never ends.
    env 4: 0.58 m from step 10 on, never ends.
    """
    t, n = 100, 5
    height = torch.full((t, n), 0.75)
    height[30:, 0], height[40:, 0], height[50:, 0], height[60:, 0] = 0.55, 0.47, 0.40, 0.20
    height[20:, 1] = 0.48
    height[10:, 4] = 0.58
    tilt = torch.zeros(t, n)
    tilt[10:13, 3] = 0.9
    terminated = torch.zeros(t, n, dtype=torch.bool)
    truncated = torch.zeros(t, n, dtype=torch.bool)
    terminated[60, 0] = True
    truncated[79, 2] = True
    # after env 0's fall the env respawns upright: the judge must never look there
    height[61:, 0] = 0.75
    return make_trace(t, n, DT, base_height=height, tilt_xy=tilt, terminated=terminated, truncated=truncated)


def test_sweep_changes_judgment_not_rollouts():
    trace = sweep_trace()
    before = trace.fingerprint()
    height_before = trace.base_height.clone()
    sets = [TRAIN] + [ThresholdSet(f"eval {h:.2f} m", eval_success_height=h) for h in (0.60, 0.50, 0.45)]
    result = sweep(trace, sets, training_rule=TRAIN)
    assert trace.fingerprint() == before == result.fingerprint
    assert torch.equal(trace.base_height, height_before)

    rows = {row.thresholds.name: row for row in result.rows}
    # falls: 0.60 -> envs 0, 1, 4; 0.50 -> envs 0, 1; 0.45 -> env 0; the training rule -> env 0
    assert [rows[name].falls for name in ("train rule 0.25 m", "eval 0.60 m", "eval 0.50 m", "eval 0.45 m")] == [1, 3, 2, 1]
    assert rows["eval 0.60 m"].fall_rate == pytest.approx(0.6)
    assert rows["eval 0.50 m"].fall_rate == pytest.approx(0.4)
    assert rows["eval 0.45 m"].fall_rate == pytest.approx(0.2)
    for row in result.rows:  # the timeout is never a fall, whatever the thresholds
        assert row.timeouts == 1
        assert row.falls + row.timeouts + row.survivors == 5
    # first falls: env 4 at step 10 (0.22 s), env 1 at 20 (0.42 s), env 0 at 30 / 40 / 50 / 60
    assert rows["eval 0.60 m"].first_fall_s == pytest.approx(0.22)
    assert rows["eval 0.60 m"].median_fall_s == pytest.approx(0.42)
    assert rows["eval 0.50 m"].median_fall_s == pytest.approx((0.42 + 0.82) / 2)
    assert rows["eval 0.45 m"].first_fall_s == pytest.approx(1.02)
    assert rows["train rule 0.25 m"].first_fall_s == pytest.approx(1.22)
    assert all(row.cause_counts == {"height": row.falls, "tilt": 0, "lateral": 0, "train_rule": 0} for row in result.rows)
    assert "fingerprint " + before in format_sweep_table(result)


def test_first_crossings_and_grace():
    trace = sweep_trace()
    judged = judge_falls(trace, ThresholdSet("eval 0.60 m"))
    # env 3 tilted at step 10 (raw crossing), but tilt is checked from episode step 20 only
    assert judged.first_raw_step[3].tolist() == [-1, 10, -1]
    assert judged.first_counted_step[3].tolist() == [-1, -1, -1]
    assert int(judged.outcome[3]) == SURVIVED
    # env 0: height first below 0.60 at step 30; its respawn (0.75 m) after step 60 is outside the window
    assert judged.first_raw_step[0].tolist() == [30, -1, -1]
    assert judged.first_raw_time_s()[0, 0].item() == pytest.approx(0.62)
    assert math.isnan(judged.first_raw_time_s()[0, 1].item())

    # grace boundary: tilt over at step index 18 (episode step 19) is ignored, at 19 (step 20) it is a fall
    for index, expect in ((18, SURVIVED), (19, FALL)):
        tilt = torch.zeros(30, 1)
        tilt[index, 0] = 0.9
        j = judge_falls(make_trace(30, 1, DT, tilt_xy=tilt), ThresholdSet("eval"))
        assert int(j.outcome[0]) == expect
    assert CAUSE_NAMES[int(j.cause[0])] == "tilt" and int(j.end_step[0]) == 19


def test_fall_rate_counts_terminations_only():
    # env 0: timeout at step 9; env 1: falls on that same last step (terminated wins); env 2: reaches the horizon
    height = torch.full((10, 3), 0.75)
    height[9, 1] = 0.2
    terminated = torch.zeros(10, 3, dtype=torch.bool)
    truncated = torch.zeros(10, 3, dtype=torch.bool)
    truncated[9, 0] = truncated[9, 1] = True
    terminated[9, 1] = True
    trace = make_trace(10, 3, DT, base_height=height, terminated=terminated, truncated=truncated)
    judged = judge_falls(trace, TRAIN)
    assert judged.outcome.tolist() == [TIMEOUT, FALL, SURVIVED]
    assert [CAUSE_NAMES[int(c)] for c in judged.cause] == ["timeout", "height", "none"]
    row = sweep(trace, [TRAIN]).rows[0]
    assert (row.falls, row.timeouts, row.survivors) == (1, 1, 1)
    assert row.fall_rate == pytest.approx(1 / 3)


def test_set_looser_than_training_reports_train_rule_falls():
    trace = sweep_trace()
    loose = ThresholdSet("loose 0.10 m", eval_success_height=0.10)
    judged = judge_falls(trace, loose)
    # env 0 terminated (0.20 m) without crossing 0.10 m: still a fall, labelled as the training rule's
    assert int(judged.outcome[0]) == FALL and CAUSE_NAMES[int(judged.cause[0])] == "train_rule"
    assert int(judged.end_step[0]) == 60
    assert loose.looser_than(TRAIN) == ["height"]
    assert ThresholdSet("eval").looser_than(TRAIN) == []
