"""Gait metrics and walking acceptance, apart from survival.

Surviving the horizon is not walking: the notes' v92 policy stood 15 s without a fall and moved
4.748 m, with both feet on the ground the whole time (air time 0, step frequency 0): it slid. So
acceptance is *survives and walks*, and "walks" is judged on the foot-contact trace.

Everything here is a pure function of per-step traces, computed over each env's first-done window
``window`` ``[T, N]`` (see :mod:`.trace`), so synthetic traces test it exactly. ``T`` steps of
``dt`` seconds, ``N`` envs, ``F = 2`` feet (column 0 left, 1 right), ``J`` joints.

Contact chatter: a foot that loses contact for less than ``min_swing_s`` (default 0.05 s, i.e. one
or two 50 Hz steps) between two contact steps did not take a step; :func:`debounce_contact` fills
such gaps before any metric is computed, so flicker never reads as a high cadence.

Definitions (per env, over its window of ``L`` steps, duration ``L * dt``):

* ``double_support_ratio``: fraction of steps with every foot in contact.
* ``mean_air_time_s``: mean duration of the completed swing phases (a foot leaves the ground and
  touches down again inside the window), both feet pooled; 0 when there is none. A swing still in
  the air when the window ends is not counted.
* ``step_frequency_hz``: touchdowns of either foot (contact after a step without contact) per
  second. A walk at one stride per second has 2 Hz.
* ``displacement_m``: planar distance from the spawn position to the root at the window's last step.
* ``velocity_tracking_error``: mean over steps of ``|v_xy - cmd_xy|`` in the body frame (m/s).
* ``torque_rms``: RMS over steps of the joint-torque vector norm ``|tau|_2`` (N m).
* ``gait_score`` in [0, 1]: mean of four sub-scores, each 1 when its acceptance threshold is met
  and falling linearly to 0: air ``min(air / air_min, 1)``; support ``1`` up to the double-support
  limit, then linear to 0 at ratio 1; cadence ``1`` inside the frequency band, ``f / f_min`` below
  it, ``1 - (f - f_max) / f_max`` above it; tracking ``1`` up to the error limit, then linear to 0 at
  twice the limit. A ranking aid only: acceptance uses the thresholds, never the score.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import torch

from isaac_adapter.evaluation.trace import RolloutTrace, at_step


@dataclass(frozen=True)
class GaitThresholds:
    """Acceptance thresholds of "walks". Defaults are documented targets for the G1 at walking speed.

    Attributes:
        min_mean_air_time_s: the feet must really swing (v92 had 0).
        max_double_support_ratio: at most half of the time on both feet (v92 had 1.0).
        step_frequency_hz: ``(low, high)`` band of touchdowns per second (v92 had 0).
        max_velocity_tracking_error: m/s, mean planar error to the command.
        walk_command_speed: m/s; envs commanded slower than this are asked to stand, so only the
            tracking criterion applies to them (standing on both feet is right there).
    """

    min_mean_air_time_s: float = 0.2
    max_double_support_ratio: float = 0.5
    step_frequency_hz: tuple[float, float] = (1.0, 3.0)
    max_velocity_tracking_error: float = 0.15
    walk_command_speed: float = 0.1


GAIT_CHECKS = ("air_time", "double_support", "step_frequency", "tracking")


@dataclass
class GaitMetrics:
    """Per-env gait metrics, each ``[N]`` (definitions in the module docstring)."""

    window_s: torch.Tensor
    double_support_ratio: torch.Tensor
    mean_air_time_s: torch.Tensor
    step_frequency_hz: torch.Tensor
    displacement_m: torch.Tensor
    velocity_tracking_error: torch.Tensor
    torque_rms: torch.Tensor
    command_speed: torch.Tensor

    def row(self, env: int) -> dict[str, float]:
        return {f.name: float(getattr(self, f.name)[env]) for f in fields(self)}


def _masked_mean(values: torch.Tensor, window: torch.Tensor) -> torch.Tensor:
    """Mean over steps inside the window: ``values`` ``[T, N]`` -> ``[N]`` (0 for an empty window)."""
    w = window.to(values.dtype)
    return (values * w).sum(0) / w.sum(0).clamp_min(1.0)


def double_support_ratio(contact: torch.Tensor, window: torch.Tensor) -> torch.Tensor:
    """``[N]`` fraction of window steps with every foot in contact. ``contact`` ``[T, N, F]`` bool."""
    return _masked_mean(contact.all(-1).float(), window)


def debounce_contact(contact: torch.Tensor, dt: float, min_swing_s: float) -> torch.Tensor:
    """``[T, N, F]`` bool: ``contact`` with no-contact gaps shorter than ``min_swing_s`` filled.

    Only gaps with contact on both sides are filled (a foot in the air at the start or the end of
    the trace keeps its swing).
    """
    min_steps = math.ceil(min_swing_s / dt - 1e-9)
    if min_steps <= 1:
        return contact
    out = contact.clone()
    gap = torch.zeros(contact.shape[1:], dtype=torch.long)  # current run of no-contact steps
    seen_contact = torch.zeros(contact.shape[1:], dtype=torch.bool)
    for t in range(contact.shape[0]):
        landing = contact[t] & seen_contact & (gap > 0) & (gap < min_steps)
        for back in range(1, min_steps):
            fill = landing & (gap >= back)
            out[t - back] |= fill
        gap = torch.where(contact[t], torch.zeros_like(gap), gap + 1)
        seen_contact |= contact[t]
    return out


def touchdowns(contact: torch.Tensor, window: torch.Tensor) -> torch.Tensor:
    """``[T, N, F]`` bool: the foot is in contact at ``t`` and was not at ``t - 1`` (both inside the window)."""
    previous = torch.cat([contact[:1], contact[:-1]], dim=0)  # step 0 has no predecessor: no touchdown
    inside = window & torch.cat([torch.zeros_like(window[:1]), window[:-1]], dim=0)
    return contact & ~previous & inside.unsqueeze(-1)


def swing_phases(contact: torch.Tensor, window: torch.Tensor, dt: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Total duration and count of completed swing phases per env, both feet pooled.

    Returns:
        ``(total_air_s [N], swings [N])``: a swing is a run of no-contact steps inside the window
        that ends in a touchdown inside the window; its duration is its number of steps times ``dt``.
    """
    n, f = contact.shape[1], contact.shape[2]
    air_steps = torch.zeros(n, f)
    total = torch.zeros(n)
    count = torch.zeros(n)
    landed = touchdowns(contact, window)
    for t in range(contact.shape[0]):
        completed = landed[t]
        total += (air_steps * completed).sum(-1) * dt
        count += completed.sum(-1)
        in_air = ~contact[t] & window[t].unsqueeze(-1)
        air_steps = torch.where(in_air, air_steps + 1, torch.zeros_like(air_steps))
    return total, count


def mean_air_time(contact: torch.Tensor, window: torch.Tensor, dt: float) -> torch.Tensor:
    """``[N]`` mean completed swing duration (s), 0 when no swing completed."""
    total, count = swing_phases(contact, window, dt)
    return torch.where(count > 0, total / count.clamp_min(1.0), torch.zeros_like(total))


def step_frequency(contact: torch.Tensor, window: torch.Tensor, dt: float) -> torch.Tensor:
    """``[N]`` touchdowns of either foot per second of window."""
    count = touchdowns(contact, window).sum(dim=(0, 2)).float()
    return count / (window.sum(0).float() * dt).clamp_min(dt)


def displacement(start_pos_w: torch.Tensor, root_pos_w: torch.Tensor, last_step: torch.Tensor) -> torch.Tensor:
    """``[N]`` planar distance from ``start_pos_w`` ``[N, 3]`` to ``root_pos_w`` ``[T, N, 3]`` at ``last_step`` ``[N]``."""
    return (at_step(root_pos_w, last_step)[:, :2] - start_pos_w[:, :2]).norm(dim=-1)


def velocity_tracking_error(lin_vel_b: torch.Tensor, command: torch.Tensor, window: torch.Tensor) -> torch.Tensor:
    """``[N]`` mean planar error ``|v_xy - cmd_xy|`` (m/s). ``lin_vel_b``, ``command`` ``[T, N, 3]``."""
    return _masked_mean((lin_vel_b[..., :2] - command[..., :2]).norm(dim=-1), window)


def torque_rms(torque: torch.Tensor, window: torch.Tensor) -> torch.Tensor:
    """``[N]`` RMS over window steps of ``|tau|_2`` (N m). ``torque`` ``[T, N, J]``."""
    return _masked_mean(torque.square().sum(-1), window).sqrt()


def gait_metrics(
    contact: torch.Tensor,
    lin_vel_b: torch.Tensor,
    command: torch.Tensor,
    torque: torch.Tensor,
    start_pos_w: torch.Tensor,
    root_pos_w: torch.Tensor,
    window: torch.Tensor,
    dt: float,
    min_swing_s: float = 0.05,
) -> GaitMetrics:
    """Every metric of the module docstring from raw traces (shapes in the per-metric functions).

    ``contact`` is debounced with ``min_swing_s`` first (:func:`debounce_contact`).
    """
    contact = debounce_contact(contact, dt, min_swing_s)
    steps = torch.arange(window.shape[0]).unsqueeze(-1)
    last_step = torch.where(window, steps, torch.zeros_like(steps)).amax(dim=0)
    return GaitMetrics(
        window_s=window.sum(0).float() * dt,
        double_support_ratio=double_support_ratio(contact, window),
        mean_air_time_s=mean_air_time(contact, window, dt),
        step_frequency_hz=step_frequency(contact, window, dt),
        displacement_m=displacement(start_pos_w, root_pos_w, last_step),
        velocity_tracking_error=velocity_tracking_error(lin_vel_b, command, window),
        torque_rms=torque_rms(torque, window),
        command_speed=command[0, :, :2].norm(dim=-1),
    )


def trace_gait_metrics(trace: RolloutTrace) -> GaitMetrics:
    """:func:`gait_metrics` of a recorded rollout over its first-done window."""
    return gait_metrics(
        trace.foot_contact, trace.lin_vel_b, trace.command, trace.torque,
        trace.start_pos_w, trace.root_pos_w, trace.window(), trace.dt,
    )


def gait_checks(metrics: GaitMetrics, thresholds: GaitThresholds) -> dict[str, torch.Tensor]:
    """Each criterion of "walks" per env ``{name: [N] bool}`` (names in :data:`GAIT_CHECKS`).

    Envs commanded to stand (speed below ``walk_command_speed``) pass the stepping criteria.
    """
    standing = metrics.command_speed < thresholds.walk_command_speed
    low, high = thresholds.step_frequency_hz
    f = metrics.step_frequency_hz
    return {
        "air_time": standing | (metrics.mean_air_time_s >= thresholds.min_mean_air_time_s),
        "double_support": standing | (metrics.double_support_ratio <= thresholds.max_double_support_ratio),
        "step_frequency": standing | ((f >= low) & (f <= high)),
        "tracking": metrics.velocity_tracking_error <= thresholds.max_velocity_tracking_error,
    }


def gait_score(metrics: GaitMetrics, thresholds: GaitThresholds) -> torch.Tensor:
    """``[N]`` documented score in [0, 1] (module docstring); 1 when every threshold is met."""
    low, high = thresholds.step_frequency_hz
    air = (metrics.mean_air_time_s / thresholds.min_mean_air_time_s).clamp(0.0, 1.0)
    ds_max = thresholds.max_double_support_ratio
    support = ((1.0 - metrics.double_support_ratio) / (1.0 - ds_max)).clamp(0.0, 1.0)
    f = metrics.step_frequency_hz
    cadence = torch.where(f < low, f / low, torch.where(f > high, 1.0 - (f - high) / high, torch.ones_like(f)))
    err_max = thresholds.max_velocity_tracking_error
    tracking = (2.0 - metrics.velocity_tracking_error / err_max).clamp(0.0, 1.0)
    return (air + support + cadence.clamp(0.0, 1.0) + tracking) / 4.0


@dataclass
class Acceptance:
    """Per-env verdict ``[N]`` bool: ``accepted = survived & walks``; ``checks`` says which gait criterion failed."""

    accepted: torch.Tensor
    survived: torch.Tensor
    walks: torch.Tensor
    checks: dict[str, torch.Tensor]
    score: torch.Tensor

    def reasons(self, env: int) -> list[str]:
        """Why env ``env`` was rejected (empty when accepted)."""
        out = [] if bool(self.survived[env]) else ["fell"]
        return out + [name for name, ok in self.checks.items() if not bool(ok[env])]


def walking_means(metrics: GaitMetrics, thresholds: GaitThresholds) -> GaitMetrics:
    """The population as one row ``[1]``: stepping metrics (double support, air time, step
    frequency) averaged over the envs commanded to walk, everything else over every env.

    ``command_speed`` is ``walk_command_speed`` when some env walks and 0 when none does, so
    :func:`gait_checks` of the row exempts the stepping criteria exactly when no env is asked to step.
    """
    walking = metrics.command_speed >= thresholds.walk_command_speed
    any_walking = bool(walking.any())

    def over_walkers(values: torch.Tensor) -> torch.Tensor:
        return values[walking].mean().reshape(1) if any_walking else values.new_zeros(1)

    def over_all(values: torch.Tensor) -> torch.Tensor:
        return values.mean().reshape(1)

    return GaitMetrics(
        window_s=over_all(metrics.window_s),
        double_support_ratio=over_walkers(metrics.double_support_ratio),
        mean_air_time_s=over_walkers(metrics.mean_air_time_s),
        step_frequency_hz=over_walkers(metrics.step_frequency_hz),
        displacement_m=over_all(metrics.displacement_m),
        velocity_tracking_error=over_all(metrics.velocity_tracking_error),
        torque_rms=over_all(metrics.torque_rms),
        command_speed=metrics.command_speed.new_full((1,), thresholds.walk_command_speed if any_walking else 0.0),
    )


def policy_verdict(survived: torch.Tensor, metrics: GaitMetrics, thresholds: GaitThresholds) -> dict[str, bool]:
    """The policy-level verdict: no env fell, and :func:`gait_checks` holds for the population's
    :func:`walking_means` (stepping criteria over the envs commanded to walk, tracking over every env;
    a stepping criterion with no env to apply to holds).

    Returns ``{"no_falls", <each name of GAIT_CHECKS>, "accepted"}``.
    """
    checks = gait_checks(walking_means(metrics, thresholds), thresholds)
    verdict = {"no_falls": bool(survived.all()), **{name: bool(ok[0]) for name, ok in checks.items()}}
    verdict["accepted"] = all(verdict.values())
    return verdict


def accept(survived: torch.Tensor, metrics: GaitMetrics, thresholds: GaitThresholds) -> Acceptance:
    """Acceptance = survives AND walks. ``survived`` ``[N]`` bool: no fall under the evaluation thresholds."""
    checks = gait_checks(metrics, thresholds)
    walks = torch.stack(list(checks.values())).all(0)
    return Acceptance(survived & walks, survived.clone(), walks, checks, gait_score(metrics, thresholds))
