"""Threshold sweep: one checkpoint, one set of rollouts, several judgments.

The notes' v80 experiment lowered the fall height from 0.60 to 0.45 m and saw the first fall move
from 1.263 s to 1.380 s: a change of judgment, not of policy. Here every threshold set judges the
*same* :class:`~isaac_adapter.evaluation.trace.RolloutTrace` (its fingerprint heads the table), so a
difference between rows can only come from the thresholds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from ppo_bootstrap.progress import Progress, ProgressReporter

from isaac_adapter.evaluation.gait import GaitMetrics, GaitThresholds, accept
from isaac_adapter.evaluation.judge import FALL, SURVIVED, TIMEOUT, FallJudgement, ThresholdSet, judge_falls
from isaac_adapter.evaluation.trace import RolloutTrace
from isaac_adapter.tasks.g1_walk.causes import CAUSE_NAMES, CAUSE_TRAIN_RULE, SIGNAL_CAUSES

#: The evaluation heights (m) the command line's sweep judges by default: the task's 0.60 m and two
#: looser ones, on the same rollouts.
SWEEP_HEIGHTS = (0.60, 0.50, 0.45)

FALL_CAUSES = tuple(CAUSE_NAMES[code] for code in (*SIGNAL_CAUSES, CAUSE_TRAIN_RULE))  # height, tilt, lateral, train_rule


@dataclass
class SweepRow:
    """Summary of one threshold set over ``num_envs`` envs.

    Attributes:
        falls, timeouts, survivors: env counts; they add up to ``num_envs``. A fall counts
            terminations only; a timeout is reported apart; a survivor reached the horizon.
        first_fall_s: earliest fall time over envs (NaN without falls); ``median_fall_s`` likewise.
        cause_counts: falls by exclusive cause (:data:`FALL_CAUSES`).
        accepted: envs that survive under this set and walk (None without gait metrics).
        looser_than_training: signals on which this set is looser than the training rule; its
            falls there can only show up as ``train_rule``.
    """

    thresholds: ThresholdSet
    num_envs: int
    falls: int
    timeouts: int
    survivors: int
    first_fall_s: float
    median_fall_s: float
    cause_counts: dict[str, int]
    accepted: int | None = None
    looser_than_training: list[str] = field(default_factory=list)

    @property
    def fall_rate(self) -> float:
        return self.falls / self.num_envs

    @property
    def timeout_rate(self) -> float:
        return self.timeouts / self.num_envs


@dataclass
class SweepResult:
    """Rows and per-env judgements of every set, plus the fingerprint of the one trace they judged."""

    rows: list[SweepRow]
    judgements: list[FallJudgement]
    fingerprint: str
    horizon_s: float


def summarize(judgement: FallJudgement, accepted: torch.Tensor | None = None) -> SweepRow:
    """One :class:`SweepRow` from a per-env judgement (``accepted`` ``[N]`` bool, optional)."""
    outcome = judgement.outcome
    fall_times = judgement.end_time_s()[outcome == FALL]
    causes = [CAUSE_NAMES[int(c)] for c in judgement.cause[outcome == FALL]]
    return SweepRow(
        thresholds=judgement.thresholds,
        num_envs=outcome.numel(),
        falls=int((outcome == FALL).sum()),
        timeouts=int((outcome == TIMEOUT).sum()),
        survivors=int((outcome == SURVIVED).sum()),
        first_fall_s=float(fall_times.min()) if fall_times.numel() else math.nan,
        median_fall_s=float(fall_times.quantile(0.5)) if fall_times.numel() else math.nan,
        cause_counts={name: causes.count(name) for name in FALL_CAUSES},
        accepted=int(accepted.sum()) if accepted is not None else None,
    )


def sweep(
    trace: RolloutTrace,
    threshold_sets: list[ThresholdSet],
    gait: tuple[GaitMetrics, GaitThresholds] | None = None,
    training_rule: ThresholdSet | None = None,
    progress: Progress = False,
) -> SweepResult:
    """Judge ``trace`` with each set; gait metrics (computed once) give each set's acceptance count.

    ``progress`` counts the sets judged (:data:`ppo_bootstrap.progress.Progress`)."""
    rows, judgements = [], []
    with ProgressReporter(len(threshold_sets), "sweep", progress, unit="set") as bar:
        for thresholds in threshold_sets:
            judgement = judge_falls(trace, thresholds)
            accepted = None
            if gait is not None:
                metrics, gait_thresholds = gait
                accepted = accept(judgement.outcome != FALL, metrics, gait_thresholds).accepted
            row = summarize(judgement, accepted)
            if training_rule is not None:
                row.looser_than_training = thresholds.looser_than(training_rule)
            rows.append(row)
            judgements.append(judgement)
            bar.update()
    return SweepResult(rows, judgements, trace.fingerprint(), trace.horizon_steps * trace.dt)


def number_cell(value: float, spec: str) -> str:
    """``value`` formatted by ``spec`` for a table, or ``-`` for nan (nothing measured)."""
    return "-" if math.isnan(value) else format(value, spec)


def format_sweep_table(result: SweepResult) -> str:
    """A plain-text table, one line per threshold set."""
    header = (
        f"{'threshold set':<22} {'height':>6} {'tilt':>5} {'lat':>5} {'fall':>7} {'timeout':>8} "
        f"{'survive':>8} {'1st fall s':>10} {'med fall s':>10}  causes h/t/l/train  accepted"
    )
    lines = [
        f"threshold sweep over one rollout set (fingerprint {result.fingerprint}, horizon {result.horizon_s:g} s)",
        header,
        "-" * len(header),
    ]
    for row in result.rows:
        t, c = row.thresholds, row.cause_counts
        accepted = "-" if row.accepted is None else f"{row.accepted}/{row.num_envs}"
        note = f"  (looser than training on {', '.join(row.looser_than_training)})" if row.looser_than_training else ""
        lines.append(
            f"{t.name:<22} {t.eval_success_height:>6.2f} {t.tilt_xy_max:>5.2f} {t.lateral_vel_max:>5.2f} "
            f"{row.fall_rate:>7.1%} {row.timeout_rate:>8.1%} {row.survivors / row.num_envs:>8.1%} "
            f"{number_cell(row.first_fall_s, '.3f'):>10} {number_cell(row.median_fall_s, '.3f'):>10}  "
            f"{c['height']:>3}/{c['tilt']}/{c['lateral']}/{c['train_rule']:<8} {accepted:>9}{note}"
        )
    return "\n".join(lines)
