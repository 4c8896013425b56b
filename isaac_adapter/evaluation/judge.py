"""Post-hoc fall judgment of a recorded rollout under a set of evaluation thresholds.

Training termination and evaluation acceptance are different questions. The task ends a training
episode with a permissive rule (``train_collapse_height`` 0.25 m) so PPO sees the collapse; the
evaluation asks whether the posture stayed acceptable (``eval_success_height`` 0.60 m, plus tilt and
lateral-velocity limits). The judge answers the second question on the recorded per-step trace of
base height, tilt and lateral velocity, inside each env's first-done window, without touching the
rollout. Several threshold sets can judge the same trace (:mod:`.sweep`).

Rules, per env, for a :class:`ThresholdSet`: the task's own fall rule (:func:`terms.fall_signals`,
:func:`terms.active_falls`, :func:`terms.exclusive_cause`), called with the set's thresholds:

* signal ``i`` (height, tilt, lateral) *crosses* at step ``t`` when it is beyond its threshold; the
  crossing *counts* from episode step ``k = t + 1 >= ceil(grace_i / dt)`` on (the task's grace
  arithmetic; height is checked from step 1). Not a debounce: one counted step is a fall.
* outcome ``fall`` when a counted crossing happens in the window; its exclusive cause is the
  highest-priority signal counted at that step (height > tilt > lateral), as in the task.
* ``fall`` with cause ``train_rule`` when the env terminated (the training rule fired) before any
  evaluation crossing. Only possible when the set is looser than the training rule somewhere; the
  rollout stopped there, so nothing can say it would have survived.
* else ``timeout`` when the env's episode was truncated inside the horizon (reported apart: not a
  fall, and not a survivor of the full horizon), else ``survived``.

Cause codes and names are the task's one table (:mod:`isaac_adapter.tasks.g1_walk.causes`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from isaac_adapter.evaluation.trace import RolloutTrace
from isaac_adapter.tasks.g1_walk import terms
from isaac_adapter.tasks.g1_walk.causes import CAUSE_NONE, CAUSE_TIMEOUT, CAUSE_TRAIN_RULE, NEVER
from isaac_adapter.tasks.g1_walk.config import G1WalkConfig

OUTCOMES = ("survived", "fall", "timeout")
SURVIVED, FALL, TIMEOUT = 0, 1, 2


@dataclass(frozen=True)
class ThresholdSet:
    """One evaluation judgment of posture. Units as in the G1 task.

    Attributes:
        name: label in tables and plots.
        eval_success_height: m; root height below it is a fall.
        tilt_xy_max: on ``tilt_xy`` (0 upright, 1 flat; 0.8 is about 63 degrees of tilt).
        lateral_vel_max: m/s on ``|v_y|`` in the body frame.
        tilt_grace_s, lateral_grace_s: start-of-episode windows in which the rule is not checked.

    The defaults are the G1 task's termination config (:class:`G1WalkConfig`), stated there once.
    """

    name: str
    eval_success_height: float = G1WalkConfig.eval_success_height
    tilt_xy_max: float = G1WalkConfig.tilt_threshold
    lateral_vel_max: float = G1WalkConfig.lateral_vel_threshold
    tilt_grace_s: float = G1WalkConfig.tilt_grace_s
    lateral_grace_s: float = G1WalkConfig.lateral_grace_s

    def first_checked_steps(self, dt: float) -> torch.Tensor:
        """``[3]`` long: first episode step each rule is checked (height, tilt, lateral)."""
        return terms.first_checked_steps(self.tilt_grace_s, self.lateral_grace_s, dt)

    def looser_than(self, other: ThresholdSet) -> list[str]:
        """Signals on which this set accepts something ``other`` ends the episode for."""
        looser = []
        if self.eval_success_height < other.eval_success_height:
            looser.append("height")
        if self.tilt_xy_max > other.tilt_xy_max or self.tilt_grace_s > other.tilt_grace_s:
            looser.append("tilt")
        if self.lateral_vel_max > other.lateral_vel_max or self.lateral_grace_s > other.lateral_grace_s:
            looser.append("lateral")
        return looser


@dataclass
class FallJudgement:
    """Per-env verdict of one :class:`ThresholdSet` on one trace. ``N`` envs.

    Attributes:
        thresholds: the set that judged.
        outcome: ``[N]`` long, :data:`SURVIVED` / :data:`FALL` / :data:`TIMEOUT`.
        cause: ``[N]`` long, a code of :data:`~isaac_adapter.tasks.g1_walk.causes.CAUSE_NAMES`.
        end_step: ``[N]`` long, step index of the fall or timeout, :data:`NEVER` for survivors.
        first_raw_step: ``[N, 3]`` long, first step each signal was beyond its threshold, grace
            ignored, inside the window; :data:`NEVER` if it never was.
        first_counted_step: ``[N, 3]`` long, first step each signal's rule fired (grace applied).
        dt: policy step (s).
    """

    thresholds: ThresholdSet
    outcome: torch.Tensor
    cause: torch.Tensor
    end_step: torch.Tensor
    first_raw_step: torch.Tensor
    first_counted_step: torch.Tensor
    dt: float

    @property
    def fell(self) -> torch.Tensor:
        return self.outcome == FALL

    def end_time_s(self) -> torch.Tensor:
        """``[N]`` time of the end (step ``t`` ends at ``(t + 1) * dt``), NaN for survivors."""
        return steps_to_seconds(self.end_step, self.dt)

    def first_raw_time_s(self) -> torch.Tensor:
        """``[N, 3]`` first-crossing times (s), NaN where the signal never crossed."""
        return steps_to_seconds(self.first_raw_step, self.dt)


def steps_to_seconds(step: torch.Tensor, dt: float) -> torch.Tensor:
    """Time at the end of step index ``step`` (``(step + 1) * dt``); NaN where ``step`` is :data:`NEVER`."""
    seconds = (step.double() + 1.0) * dt
    return torch.where(step == NEVER, torch.full_like(seconds, float("nan")), seconds)


def _first_true(mask: torch.Tensor) -> torch.Tensor:
    """First index along dim 0 where ``mask`` ``[T, ...]`` is true, :data:`NEVER` if none -> ``[...]``."""
    t = mask.shape[0]
    steps = torch.arange(t, device=mask.device).view(-1, *([1] * (mask.dim() - 1))).expand_as(mask)
    first = torch.where(mask, steps, torch.full_like(steps, t)).amin(dim=0)
    return torch.where(first == t, NEVER, first)


def fall_crossings(trace: RolloutTrace, thresholds: ThresholdSet) -> tuple[torch.Tensor, torch.Tensor]:
    """``(raw, counted)``, ``[T, N, 3]`` bool each: every step of ``trace`` judged by the task's fall
    rule with the set's thresholds; ``counted`` has the grace windows applied. Window not applied.

    Every window is the env's first episode, which starts at the initial reset: step ``t`` is
    episode step ``t + 1``.
    """
    t, n = trace.num_steps, trace.num_envs
    raw = terms.fall_signals(
        trace.base_height.reshape(t * n), trace.tilt_xy.reshape(t * n), trace.lin_vel_b.reshape(t * n, 3),
        thresholds.eval_success_height, thresholds.tilt_xy_max, thresholds.lateral_vel_max,
    )
    episode_step = torch.arange(1, t + 1).repeat_interleave(n)
    counted = terms.active_falls(raw, episode_step, thresholds.first_checked_steps(trace.dt))
    return raw.view(t, n, 3), counted.view(t, n, 3)


def judge_falls(trace: RolloutTrace, thresholds: ThresholdSet) -> FallJudgement:
    """Judge every env's first-done window of ``trace`` with ``thresholds`` (rules in the module docstring)."""
    window = trace.window().unsqueeze(-1)  # [T, N, 1]
    raw, counted = fall_crossings(trace, thresholds)
    raw, counted = raw & window, counted & window
    first_raw = _first_true(raw)
    first_counted = _first_true(counted)

    big = trace.num_steps
    fall_step = torch.where(first_counted == NEVER, big, first_counted).amin(dim=-1)  # [N]
    eval_fell = fall_step < big
    env_ids = torch.arange(trace.num_envs)
    at_fall = counted[fall_step.clamp(max=big - 1), env_ids]  # [N, 3] rules counted at the fall step
    signal_cause = terms.exclusive_cause(at_fall, torch.zeros_like(eval_fell))

    first_done = trace.first_done_step()
    last = trace.last_step()
    ended = first_done != NEVER
    terminated_at_end = trace.terminated[last, env_ids] & ended
    truncated_at_end = trace.truncated[last, env_ids] & ended

    outcome = torch.full((trace.num_envs,), SURVIVED, dtype=torch.long)
    cause = torch.full((trace.num_envs,), CAUSE_NONE, dtype=torch.long)
    end_step = torch.full((trace.num_envs,), NEVER, dtype=torch.long)
    # lowest precedence first: timeout, then a training-rule fall, then an evaluation fall
    timeout = truncated_at_end & ~terminated_at_end
    outcome[timeout], cause[timeout], end_step[timeout] = TIMEOUT, CAUSE_TIMEOUT, first_done[timeout]
    outcome[terminated_at_end], cause[terminated_at_end] = FALL, CAUSE_TRAIN_RULE
    end_step[terminated_at_end] = first_done[terminated_at_end]
    outcome[eval_fell], cause[eval_fell], end_step[eval_fell] = FALL, signal_cause[eval_fell], fall_step[eval_fell]
    return FallJudgement(thresholds, outcome, cause, end_step, first_raw, first_counted, trace.dt)
