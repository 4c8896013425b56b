"""Gait metrics and acceptance on synthetic traces with hand-derived answers."""

from __future__ import annotations

import pytest
import torch

from isaac_adapter.evaluation.gait import (
    GaitThresholds, accept, debounce_contact, mean_air_time, step_frequency, trace_gait_metrics,
)
from isaac_adapter.evaluation.judge import FALL, judge_falls, ThresholdSet
from isaac_adapter.evaluation.synthetic import alternating_contact, make_trace, v92_slide

DT = 0.02


def test_v92_slide_survives_but_is_rejected():
    # 15 s, no fall, 4.748 m, both feet down the whole time: air time 0, step frequency 0
    trace = v92_slide()
    survived = judge_falls(trace, ThresholdSet("eval 0.60 m")).outcome != FALL
    metrics = trace_gait_metrics(trace)
    assert bool(survived[0])
    assert metrics.window_s[0].item() == pytest.approx(15.0)
    assert metrics.displacement_m[0].item() == pytest.approx(4.748, abs=1e-3)
    assert metrics.double_support_ratio[0].item() == 1.0
    assert metrics.mean_air_time_s[0].item() == 0.0
    assert metrics.step_frequency_hz[0].item() == 0.0
    assert metrics.velocity_tracking_error[0].item() == pytest.approx(0.0, abs=1e-6)

    verdict = accept(survived, metrics, GaitThresholds())
    assert not bool(verdict.accepted[0])
    assert verdict.reasons(0) == ["air_time", "double_support", "step_frequency"]
    # score: air 0, support 0, cadence 0, tracking 1
    assert verdict.score[0].item() == pytest.approx(0.25)


def test_alternating_walk_is_accepted():
    # stride 1 s: each foot swings 0.3 s per stride, half a stride apart -> both down 20 of 50 steps
    steps = 750
    trace = make_trace(steps, 2, DT, forward_vel=torch.full((steps, 2), 0.5),
                       foot_contact=alternating_contact(steps, 2), command=(0.5, 0.0, 0.0))
    metrics = trace_gait_metrics(trace)
    assert metrics.double_support_ratio.tolist() == pytest.approx([0.4, 0.4])
    assert metrics.mean_air_time_s.tolist() == pytest.approx([0.3, 0.3])
    assert metrics.step_frequency_hz.tolist() == pytest.approx([2.0, 2.0])  # 30 touchdowns in 15 s
    assert metrics.displacement_m.tolist() == pytest.approx([7.5, 7.5], abs=1e-4)
    survived = judge_falls(trace, ThresholdSet("eval 0.60 m")).outcome != FALL
    verdict = accept(survived, metrics, GaitThresholds())
    assert verdict.accepted.tolist() == [True, True]
    assert verdict.score.tolist() == pytest.approx([1.0, 1.0])


def test_a_walk_that_falls_is_rejected_and_metrics_stop_at_the_first_done():
    steps = 750
    terminated = torch.zeros(steps, 1, dtype=torch.bool)
    terminated[99, 0] = True  # fell at step 99; the trace goes on with a new episode
    height = torch.full((steps, 1), 0.75)
    height[99, 0] = 0.2
    trace = make_trace(steps, 1, DT, base_height=height, forward_vel=torch.full((steps, 1), 0.5),
                       foot_contact=alternating_contact(steps, 1), terminated=terminated)
    metrics = trace_gait_metrics(trace)
    # window = steps 0..99 (2 s): touchdowns at 20, 45, 70, 95
    assert metrics.window_s[0].item() == pytest.approx(2.0)
    assert metrics.step_frequency_hz[0].item() == pytest.approx(2.0)
    assert metrics.displacement_m[0].item() == pytest.approx(1.0, abs=1e-5)
    survived = judge_falls(trace, ThresholdSet("eval 0.60 m")).outcome != FALL
    verdict = accept(survived, metrics, GaitThresholds())
    assert not bool(verdict.accepted[0]) and verdict.reasons(0) == ["fell"]


def test_swing_and_touchdown_counting():
    # one foot: down, 1-step chatter, down, a 10-step swing, down, then a swing never landing
    contact = torch.ones(40, 1, 2, dtype=torch.bool)
    contact[5, 0, 0] = False  # chatter: 0.02 s < 0.05 s, filled
    contact[10:20, 0, 0] = False  # real swing, 0.2 s, lands at step 20
    contact[35:, 0, 0] = False  # still in the air at the end: not a completed swing
    window = torch.ones(40, 1, dtype=torch.bool)
    debounced = debounce_contact(contact, DT, 0.05)
    assert bool(debounced[5, 0, 0]) and not bool(debounced[10, 0, 0])
    assert mean_air_time(debounced, window, DT).item() == pytest.approx(0.2)
    assert step_frequency(debounced, window, DT).item() == pytest.approx(1 / (40 * DT))
    # without debouncing the chatter is a 0.02 s swing and a touchdown
    assert mean_air_time(contact, window, DT).item() == pytest.approx(0.11)
    assert step_frequency(contact, window, DT).item() == pytest.approx(2 / (40 * DT))


def test_standing_command_is_judged_on_tracking_only():
    trace = make_trace(100, 1, DT, command=(0.0, 0.0, 0.0))  # both feet down, not moving: right for a stand
    metrics = trace_gait_metrics(trace)
    verdict = accept(torch.tensor([True]), metrics, GaitThresholds())
    assert bool(verdict.accepted[0])
