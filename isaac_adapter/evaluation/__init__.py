"""Evaluation of walking policies: survival judged apart from training termination, gait acceptance,
threshold sweeps over one set of rollouts, an episode dataset and plots.

Modules, each usable on its own:

* :mod:`.trace`: per-step pre-reset traces ``[T, N, ...]`` and the first-done window.
* :mod:`.judge`: post-hoc fall judgment under a :class:`ThresholdSet` (causes, first crossings).
* :mod:`.gait`: pure gait metrics on contact / velocity / torque traces, and acceptance.
* :mod:`.sweep`: several threshold sets over one trace.
* :mod:`.gate`: the command battery and smoothness limits of a walking checkpoint, one PASS / FAIL table
  (``benchmarks/g1_gate.py``).
* :mod:`.evaluator`: runs a policy and judges the result; :class:`EvalProbe` is what it needs from an env
  (the G1 task's: :class:`isaac_adapter.evaluation.g1_probe.G1WalkProbe`). Checkpoints load through
  :mod:`ppo_bootstrap.checkpoint`.
* :mod:`.dataset`: Parquet episode dataset writer and reader.
* :mod:`.plots`: survival curves, cause bars, first-crossing histograms, foot-contact timelines
  (imports matplotlib).
"""

from isaac_adapter.evaluation.dataset import Episode, EpisodeDatasetWriter, read_episodes, read_metadata
from isaac_adapter.evaluation.evaluator import (
    ActorCriticPolicy,
    EvalConfig,
    Evaluator,
    EvalPolicy,
    EvalProbe,
    EvalReport,
    zero_policy,
)
from isaac_adapter.evaluation.gait import Acceptance, GaitMetrics, GaitThresholds, accept, gait_metrics
from isaac_adapter.evaluation.judge import FallJudgement, ThresholdSet, judge_falls
from isaac_adapter.evaluation.sweep import SweepResult, format_sweep_table, sweep
from isaac_adapter.evaluation.trace import RolloutTrace, StepSample, first_episode_mask

__all__ = [
    "Acceptance",
    "ActorCriticPolicy",
    "Episode",
    "EpisodeDatasetWriter",
    "EvalConfig",
    "EvalPolicy",
    "EvalProbe",
    "EvalReport",
    "Evaluator",
    "FallJudgement",
    "GaitMetrics",
    "GaitThresholds",
    "RolloutTrace",
    "StepSample",
    "SweepResult",
    "ThresholdSet",
    "accept",
    "first_episode_mask",
    "format_sweep_table",
    "gait_metrics",
    "judge_falls",
    "read_episodes",
    "read_metadata",
    "sweep",
    "zero_policy",
]
