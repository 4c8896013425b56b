"""The evaluator: run a policy for a fixed horizon over many envs, then judge the recorded trace.

One evaluator serves every use (acceptance, threshold sweeps, datasets, plots):

1. :meth:`Evaluator.rollout` resets the env with a fixed seed and fixed commands, steps the
   deterministic policy for ``horizon_s`` and records a :class:`~.trace.RolloutTrace`: per step and
   env the *pre-reset* state (for an env that ended this step, the env's terminal snapshot).
2. :meth:`Evaluator.evaluate` judges that trace: falls under the evaluation thresholds (post hoc,
   :mod:`.judge`), gait metrics and acceptance (:mod:`.gait`), the sweep (:mod:`.sweep`), all over
   each env's first-done window.

What the evaluator needs from an env beyond :class:`ppo_bootstrap.env.VecEnv` is the small
:class:`EvalProbe` interface, which the task provides (for the G1:
:class:`~isaac_adapter.evaluation.g1_probe.G1WalkProbe`); the evaluator never reads simulator state.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import torch

from ppo_bootstrap import checkpoint
from ppo_bootstrap.env import POLICY, ObsGroups, StepResult, VecEnv
from ppo_bootstrap.episode import State, done_mask, reset_memory
from ppo_bootstrap.modules.actor_critic import ActorCritic
from ppo_bootstrap.progress import Progress, ProgressReporter

from isaac_adapter.evaluation.dataset import EpisodeDatasetWriter
from isaac_adapter.evaluation.gait import (
    Acceptance, GaitMetrics, GaitThresholds, accept, policy_verdict, trace_gait_metrics,
)
from isaac_adapter.evaluation.judge import FALL, OUTCOMES, FallJudgement, ThresholdSet, judge_falls
from isaac_adapter.evaluation.sweep import SweepResult, format_sweep_table, number_cell, sweep
from isaac_adapter.evaluation.trace import RolloutTrace, StepSample, TraceBuilder, at_step
from isaac_adapter.tasks.g1_walk.causes import CAUSE_NAMES, NEVER

# -- the env side -------------------------------------------------------------------------------


class EvalProbe(Protocol):
    """What the evaluator reads from an env, besides ``VecEnv.step``.

    Attributes:
        env: the :class:`~ppo_bootstrap.env.VecEnv` being evaluated.
        dt: policy step (s).
        cause_names: names of the env's cause codes (``info["termination_cause"]``), index = code;
            the judge's codes are the G1 task's table (:mod:`isaac_adapter.tasks.g1_walk.causes`).
        training_rule: the env's own termination rule as a :class:`ThresholdSet` (None if it has
            none); judging with it must reproduce the env's falls, which the evaluator checks.
        evaluation_rule: the default evaluation posture thresholds of the task.
    """

    env: VecEnv
    dt: float
    cause_names: tuple[str, ...]
    training_rule: ThresholdSet | None
    evaluation_rule: ThresholdSet

    def reset(self, seed: int, commands: torch.Tensor | None) -> ObsGroups:
        """Reset every env reproducibly from ``seed``; hold ``commands`` ``[N, 3]`` (None: the env's own)."""
        ...

    def current(self) -> StepSample:
        """The state of every env now (right after :meth:`reset`)."""
        ...

    def after_step(self, result: StepResult) -> StepSample:
        """The state of every env after the step ``result`` came from, *before* any same-step reset."""
        ...


# -- the policy side ----------------------------------------------------------------------------


class EvalPolicy(Protocol):
    """Deterministic policy under evaluation: ``obs`` groups -> actions ``[N, A]``.

    ``reset(done)`` (optional) clears the memory of envs whose episode ended (``done`` ``[N]`` bool).
    """

    def __call__(self, obs: ObsGroups) -> torch.Tensor: ...


class ActorCriticPolicy:
    """An :class:`ActorCritic` acting deterministically (``act_inference``), memory reset on done."""

    def __init__(self, policy: ActorCritic, num_envs: int, device: torch.device | str = "cpu") -> None:
        self.policy = policy.eval()
        self.device = torch.device(device)
        self.num_envs = num_envs
        self.state: State = policy.initial_state(num_envs, self.device)[0]

    @classmethod
    def from_checkpoint(cls, path: str | os.PathLike, obs: ObsGroups, num_actions: int) -> "ActorCriticPolicy":
        """The policy of a ``Runner`` checkpoint (:func:`ppo_bootstrap.checkpoint.load_policy`) for envs
        that return ``obs``: as many envs as its rows, on its device."""
        device = obs[POLICY].device
        return cls(checkpoint.load_policy(path, obs, num_actions, device), obs[POLICY].shape[0], device)

    @torch.no_grad()
    def __call__(self, obs: ObsGroups) -> torch.Tensor:
        actions, self.state = self.policy.act_inference(obs[POLICY].to(self.device), self.state)
        return actions

    def reset(self, done: torch.Tensor) -> None:
        """Clear the memory of the envs whose episode ended (``done`` ``[N]`` bool)."""
        self.state = reset_memory(self.state, done)


def zero_policy(num_actions: int) -> Callable[[ObsGroups], torch.Tensor]:
    """Holds the nominal pose (all-zero joint offsets): the notes' "zero-policy" stand test."""

    def act(obs: ObsGroups) -> torch.Tensor:
        return torch.zeros(obs[POLICY].shape[0], num_actions, device=obs[POLICY].device)

    return act


# -- evaluation ---------------------------------------------------------------------------------


@dataclass
class EvalConfig:
    """How to evaluate.

    Attributes:
        horizon_s: evaluation length (s); independent of the env's episode length (a longer
            horizon shows the env's timeouts, which are reported apart from falls).
        seed: seed of the env's spawn noise (and commands when ``commands`` is None).
        commands: ``(v_x, v_y, w_z)`` held by every env, or ``[N, 3]``; None keeps the env's
            seeded commands.
        eval_thresholds: the acceptance posture; None takes the task's (``eval_success_height``).
        gait: thresholds of "walks".
        stop_early: stop stepping once every env has ended once (nothing after that is judged);
            never while a dataset is recorded.
    """

    horizon_s: float = 15.0
    seed: int = 0
    commands: tuple[float, float, float] | torch.Tensor | None = (0.5, 0.0, 0.0)
    eval_thresholds: ThresholdSet | None = None
    gait: GaitThresholds = field(default_factory=GaitThresholds)
    stop_early: bool = True


@dataclass
class TerminalMetrics:
    """Per env ``[N]``, at the last step of its first-done window, from the pre-reset state."""

    height: torch.Tensor
    tilt_xy: torch.Tensor
    lateral_vel: torch.Tensor


@dataclass
class EvalReport:
    """Everything one evaluation produced. Per-env tensors are ``[N]``."""

    trace: RolloutTrace
    judgement: FallJudgement
    training_judgement: FallJudgement | None
    env_mismatches: list[int]
    terminal: TerminalMetrics
    gait: GaitMetrics
    acceptance: Acceptance
    sweep: SweepResult
    config: EvalConfig

    def summary(self) -> dict[str, float]:
        """Headline numbers under the evaluation thresholds."""
        n = self.trace.num_envs
        outcome = self.judgement.outcome
        window = self.gait.window_s
        return {
            "envs": n,
            "fall_rate": float((outcome == FALL).float().mean()),
            "timeout_rate": float((outcome == OUTCOMES.index("timeout")).float().mean()),
            "survivor_rate": float((outcome == OUTCOMES.index("survived")).float().mean()),
            "accepted_rate": float(self.acceptance.accepted.float().mean()),
            "mean_window_s": float(window.mean()),
            "mean_displacement_m": float(self.gait.displacement_m.mean()),
            "mean_double_support_ratio": float(self.gait.double_support_ratio.mean()),
            "mean_air_time_s": float(self.gait.mean_air_time_s.mean()),
            "mean_step_frequency_hz": float(self.gait.step_frequency_hz.mean()),
            "mean_velocity_tracking_error": float(self.gait.velocity_tracking_error.mean()),
            "mean_torque_rms": float(self.gait.torque_rms.mean()),
            "mean_gait_score": float(self.acceptance.score.mean()),
        }

    def verdict(self) -> dict[str, bool]:
        """Policy-level acceptance (:func:`~isaac_adapter.evaluation.gait.policy_verdict`)."""
        return policy_verdict(self.judgement.outcome != FALL, self.gait, self.config.gait)

    def format(self, max_env_rows: int = 16) -> str:
        """The printed report: summary, per-env table (first ``max_env_rows`` envs) and the sweep."""
        s = self.summary()
        t = self.judgement.thresholds
        lines = [
            f"evaluation: {s['envs']} envs, horizon {self.config.horizon_s:g} s, seed {self.config.seed}, "
            f"thresholds '{t.name}' (height {t.eval_success_height:.2f} m, tilt_xy {t.tilt_xy_max:.2f}, "
            f"lateral {t.lateral_vel_max:.2f} m/s)",
            f"  fall {s['fall_rate']:.1%} (terminations only) | timeout {s['timeout_rate']:.1%} | "
            f"survived horizon {s['survivor_rate']:.1%} | accepted (survives and walks) {s['accepted_rate']:.1%}",
            f"  means: window {s['mean_window_s']:.2f} s, displacement {s['mean_displacement_m']:.3f} m, "
            f"double support {s['mean_double_support_ratio']:.2f}, air {s['mean_air_time_s']:.3f} s, "
            f"steps {s['mean_step_frequency_hz']:.2f} Hz, track err {s['mean_velocity_tracking_error']:.3f} m/s, "
            f"torque RMS {s['mean_torque_rms']:.1f} N m, gait score {s['mean_gait_score']:.3f}",
        ]
        verdict = self.verdict()
        failed = [name for name, ok in verdict.items() if name != "accepted" and not ok]
        lines.append("  policy verdict (no falls; mean gait of the walking envs within thresholds): "
                     + ("ACCEPTED" if verdict["accepted"] else f"rejected ({', '.join(failed)})"))
        if self.training_judgement is not None:
            lines.append(
                "  env check: post-hoc training rule reproduces every env's end"
                if not self.env_mismatches
                else f"  env check FAILED: training rule judged differently from the env for envs {self.env_mismatches}"
            )
        lines.append(format_env_table(self, max_env_rows))
        lines.append(format_sweep_table(self.sweep))
        return "\n".join(lines)


def format_env_table(report: EvalReport, max_rows: int = 16) -> str:
    """Per-env rows: outcome, cause, times, terminal posture, gait metrics, acceptance."""
    j, g, a, term = report.judgement, report.gait, report.acceptance, report.terminal
    cmd = report.trace.command[0]
    end_s = j.end_time_s()
    raw_s = j.first_raw_time_s()
    header = (
        f"{'env':>4} {'cmd vx':>6} {'outcome':>8} {'cause':>10} {'end s':>6} {'1st h/t/l s':>17} "
        f"{'term h':>6} {'tilt':>5} {'vy':>6} {'disp m':>6} {'dsupp':>5} {'air s':>5} {'f Hz':>5} "
        f"{'trk':>5} {'tauRMS':>6} {'score':>5}  verdict"
    )
    lines = [header]
    for env in range(min(max_rows, report.trace.num_envs)):
        firsts = "/".join(number_cell(float(v), ".2f") for v in raw_s[env])
        verdict = "accepted" if bool(a.accepted[env]) else "rejected: " + ", ".join(a.reasons(env))
        lines.append(
            f"{env:>4} {float(cmd[env, 0]):>6.2f} {OUTCOMES[int(j.outcome[env])]:>8} {CAUSE_NAMES[int(j.cause[env])]:>10} "
            f"{number_cell(float(end_s[env]), '.2f'):>6} {firsts:>17} {float(term.height[env]):>6.3f} "
            f"{float(term.tilt_xy[env]):>5.2f} {float(term.lateral_vel[env]):>6.2f} {float(g.displacement_m[env]):>6.3f} "
            f"{float(g.double_support_ratio[env]):>5.2f} {float(g.mean_air_time_s[env]):>5.2f} "
            f"{float(g.step_frequency_hz[env]):>5.2f} {float(g.velocity_tracking_error[env]):>5.2f} "
            f"{float(g.torque_rms[env]):>6.1f} {float(a.score[env]):>5.2f}  {verdict}"
        )
    if report.trace.num_envs > max_rows:
        lines.append(f"... {report.trace.num_envs - max_rows} more envs")
    return "\n".join(lines)


def env_mismatches(trace: RolloutTrace, training: FallJudgement) -> list[int]:
    """Envs whose env-reported first end differs from the post-hoc training-rule judgement.

    The training rule judged on the trace must give each terminated env the same end step and the
    same cause code (one table for env and judge: :mod:`isaac_adapter.tasks.g1_walk.causes`),
    and no fall to an env that did not terminate. A mismatch means the trace did not see what the
    env saw (for instance post-reset state read as terminal state).
    """
    first = trace.first_done_step()
    last = trace.last_step()
    env_ids = torch.arange(trace.num_envs)
    terminated = trace.terminated[last, env_ids] & (first != NEVER)
    env_cause = trace.env_cause[last, env_ids]
    bad = terminated & ((training.end_step != first) | (training.cause != env_cause))
    bad |= ~terminated & (training.outcome == FALL)
    return torch.nonzero(bad).flatten().tolist()


class Evaluator:
    """Runs and judges evaluations of one env.

    Example::

        from isaac_adapter.evaluation.g1_probe import G1WalkProbe

        env = G1WalkEnv(G1WalkConfig(num_envs=32))
        evaluator = Evaluator(G1WalkProbe(env), EvalConfig(horizon_s=15.0))
        report = evaluator.evaluate(policy, sweep_heights=(0.60, 0.50, 0.45))
        print(report.format())

    ``progress`` reports the rollout's steps and the sweep's threshold sets
    (:data:`ppo_bootstrap.progress.Progress`: ``True`` for a bar on stderr, a callable ``(done, total)``
    for one's own display); off by default. It never changes what is evaluated.
    """

    def __init__(self, probe: EvalProbe, cfg: EvalConfig | None = None, progress: Progress = False) -> None:
        self.probe = probe
        self.env = probe.env
        self.cfg = cfg or EvalConfig()
        self.progress = progress
        self.horizon_steps = round(self.cfg.horizon_s / probe.dt)
        if self.horizon_steps < 1:
            raise ValueError(f"horizon_s={self.cfg.horizon_s} is shorter than one policy step ({probe.dt} s)")

    def _commands(self) -> torch.Tensor | None:
        commands = self.cfg.commands
        if commands is None:
            return None
        commands = torch.as_tensor(commands, dtype=torch.float32)
        return commands.expand(self.env.num_envs, 3).clone() if commands.dim() == 1 else commands

    @torch.no_grad()
    def rollout(self, policy: EvalPolicy | Callable[[ObsGroups], torch.Tensor],
                recorder: EpisodeDatasetWriter | None = None) -> RolloutTrace:
        """Step ``policy`` for the horizon from a seeded reset; record the pre-reset trace (and rows into ``recorder``)."""
        env, probe = self.env, self.probe
        obs = probe.reset(self.cfg.seed, self._commands())
        if hasattr(policy, "reset"):
            policy.reset(torch.ones(env.num_envs, dtype=torch.bool))
        builder = TraceBuilder(self.horizon_steps, probe.dt, probe.current().root_pos_w)
        ended_once = torch.zeros(env.num_envs, dtype=torch.bool)
        with ProgressReporter(self.horizon_steps, "evaluate", self.progress) as bar:
            for _ in range(self.horizon_steps):
                actions = policy(obs)
                result = env.step(actions)
                sample = probe.after_step(result)
                builder.add(sample, result.reward, result.terminated, result.truncated)
                if recorder is not None:
                    recorder.add_step(obs, actions, result, cause=sample.env_cause)
                done = done_mask(result.terminated, result.truncated).cpu()
                if hasattr(policy, "reset"):
                    policy.reset(done)
                ended_once |= done
                obs = result.obs
                bar.update()
                if self.cfg.stop_early and recorder is None and bool(ended_once.all()):
                    break  # every window is closed: later steps are never judged
        return builder.build()

    def judge(self, trace: RolloutTrace, sweep_sets: list[ThresholdSet] | None = None) -> EvalReport:
        """Judge a recorded trace: evaluation falls, terminal metrics, gait, acceptance, sweep."""
        eval_rule = self.cfg.eval_thresholds or self.probe.evaluation_rule
        judgement = judge_falls(trace, eval_rule)
        training_rule = self.probe.training_rule
        training_judgement = judge_falls(trace, training_rule) if training_rule is not None else None
        mismatches = env_mismatches(trace, training_judgement) if training_judgement is not None else []

        last = trace.last_step()
        terminal = TerminalMetrics(
            height=at_step(trace.base_height, last),
            tilt_xy=at_step(trace.tilt_xy, last),
            lateral_vel=at_step(trace.lateral_vel, last),
        )
        metrics = trace_gait_metrics(trace)
        acceptance = accept(judgement.outcome != FALL, metrics, self.cfg.gait)
        sets = ([training_rule] if training_rule is not None else []) + [eval_rule]
        sets += [s for s in (sweep_sets or []) if s != eval_rule]
        sweep_result = sweep(trace, sets, (metrics, self.cfg.gait), training_rule, self.progress)
        return EvalReport(trace, judgement, training_judgement, mismatches, terminal, metrics, acceptance,
                          sweep_result, self.cfg)

    def evaluate(
        self,
        policy: EvalPolicy | Callable[[ObsGroups], torch.Tensor],
        sweep_heights: tuple[float, ...] = (),
        sweep_sets: list[ThresholdSet] | None = None,
        recorder: EpisodeDatasetWriter | None = None,
    ) -> EvalReport:
        """:meth:`rollout` once, then :meth:`judge` with the evaluation thresholds and every sweep set.

        ``sweep_heights`` adds sets that differ from the evaluation thresholds in height only.
        """
        eval_rule = self.cfg.eval_thresholds or self.probe.evaluation_rule
        sets = list(sweep_sets or [])
        for height in sweep_heights:
            sets.append(dataclasses.replace(eval_rule, name=f"eval {height:.2f} m", eval_success_height=height))
        trace = self.rollout(policy, recorder)
        return self.judge(trace, sets)

