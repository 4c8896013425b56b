"""Pictures of an evaluation (matplotlib, Agg backend: files only, no display needed).

* ``survival.png``: fraction of envs not fallen over time, one line per threshold set.
* ``causes.png``: outcome and exclusive cause counts per threshold set.
* ``first_crossings.png``: histograms of the first time each signal crossed, per threshold set.
* ``foot_contacts.png``: foot-contact timeline of a few envs, with their first done and fall.
"""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot: render to files on machines without a display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from isaac_adapter.evaluation.judge import FALL, TIMEOUT, FallJudgement  # noqa: E402
from isaac_adapter.evaluation.sweep import SweepResult  # noqa: E402
from isaac_adapter.evaluation.trace import RolloutTrace  # noqa: E402
from isaac_adapter.tasks.g1_walk.causes import CAUSE_NAMES, FALL_SIGNALS, NEVER  # noqa: E402

_COLORS = plt.get_cmap("tab10").colors


def _save(fig: plt.Figure, path: str | os.PathLike) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def plot_survival(result: SweepResult, path: str | os.PathLike) -> Path:
    """Fraction of envs that have not fallen by time ``t``, per threshold set (timeouts count as not fallen)."""
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    for i, judgement in enumerate(result.judgements):
        n = judgement.outcome.numel()
        times = np.sort(judgement.end_time_s()[judgement.fell].numpy())
        xs = np.concatenate([[0.0], times, [result.horizon_s]])
        ys = np.concatenate([[1.0], 1.0 - np.arange(1, len(times) + 1) / n, [1.0 - len(times) / n]])
        ax.step(xs, ys, where="post", color=_COLORS[i % 10], lw=2,
                label=f"{judgement.thresholds.name}  (fall {len(times)}/{n})")
    ax.set(xlim=(0, result.horizon_s), ylim=(-0.03, 1.03), xlabel="time (s)", ylabel="fraction not fallen",
           title=f"Survival per threshold set, one rollout set ({result.fingerprint})")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    return _save(fig, path)


def plot_causes(result: SweepResult, path: str | os.PathLike) -> Path:
    """Grouped bars: envs per exclusive cause (falls), timeouts and survivors, per threshold set."""
    categories = ["height", "tilt", "lateral", "train_rule", "timeout", "survived"]
    fig, ax = plt.subplots(figsize=(8, 4.2))
    sets = len(result.judgements)
    width = 0.8 / max(sets, 1)
    x = np.arange(len(categories))
    for i, judgement in enumerate(result.judgements):
        counts = []
        for name in categories:
            if name == "survived":
                counts.append(int((judgement.outcome == 0).sum()))
            elif name == "timeout":
                counts.append(int((judgement.outcome == TIMEOUT).sum()))
            else:
                counts.append(int(((judgement.outcome == FALL) & (judgement.cause == CAUSE_NAMES.index(name))).sum()))
        bars = ax.bar(x + (i - (sets - 1) / 2) * width, counts, width, color=_COLORS[i % 10],
                      label=judgement.thresholds.name)
        ax.bar_label(bars, fontsize=7, padding=1)
    ax.set_xticks(x, ["fall:\nheight", "fall:\ntilt", "fall:\nlateral", "fall:\ntrain rule", "timeout", "survived\nhorizon"])
    ax.set(ylabel="envs", title="End of each env's first episode, per threshold set")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def plot_first_crossings(result: SweepResult, path: str | os.PathLike) -> Path:
    """Per signal, the first time each env crossed its threshold (grace ignored): one dot per env, one row per set.

    Dots rather than overlaid histograms: sets that agree would hide each other.
    """
    sets = len(result.judgements)
    fig, axes = plt.subplots(1, 3, figsize=(13, 0.55 * sets + 1.8), sharey=True)
    rng = np.random.default_rng(0)  # vertical jitter only, so equal times stay visible
    for column, (ax, signal) in enumerate(zip(axes, FALL_SIGNALS)):
        top = 0.0
        for i, judgement in enumerate(result.judgements):
            times = judgement.first_raw_time_s()[:, column].numpy()
            crossed = times[np.isfinite(times)]
            y = sets - 1 - i + rng.uniform(-0.18, 0.18, size=crossed.size)
            ax.scatter(crossed, y, s=14, color=_COLORS[i % 10], alpha=0.8)
            if crossed.size:
                ax.plot([np.median(crossed)] * 2, [sets - 1 - i - 0.3, sets - 1 - i + 0.3], color="black", lw=1.5)
                top = max(top, float(crossed.max()))
            ax.annotate(f"{crossed.size}/{times.size}", (1.0, sets - 1 - i), xycoords=("axes fraction", "data"),
                        xytext=(4, 0), textcoords="offset points", va="center", fontsize=8)
        ax.set(title=f"{signal}", xlabel="first crossing (s)", xlim=(0, max(top * 1.08, 0.1)))
        ax.grid(alpha=0.3)
    axes[0].set_yticks(range(sets), [j.thresholds.name for j in reversed(result.judgements)], fontsize=8)
    axes[0].set_ylim(-0.6, sets - 0.4)
    fig.suptitle("First threshold crossing per env inside its first episode (black bar: median; right: envs crossed)",
                 y=1.0, fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """``(start, length)`` of every run of True in a 1-D bool array."""
    padded = np.concatenate([[False], mask, [False]])
    edges = np.flatnonzero(np.diff(padded.astype(np.int8)))
    return [(int(s), int(e - s)) for s, e in zip(edges[::2], edges[1::2])]


def plot_contact_timeline(
    trace: RolloutTrace, judgement: FallJudgement, path: str | os.PathLike, envs: list[int] | None = None
) -> Path:
    """Left/right foot contact of a few envs over their first episode; the end of the window is marked."""
    envs = envs if envs is not None else list(range(min(6, trace.num_envs)))
    dt = trace.dt
    window = trace.window()
    fig, ax = plt.subplots(figsize=(10, 0.75 * len(envs) + 1.2))
    yticks, ylabels = [], []
    for row, env in enumerate(envs):
        base = (len(envs) - 1 - row) * 3
        length = int(window[:, env].sum())
        for foot, name in enumerate(("L", "R")):
            y = base + (1 - foot)
            contact = trace.foot_contact[:length, env, foot].numpy()
            ax.broken_barh([(s * dt, n * dt) for s, n in _runs(contact)], (y - 0.4, 0.8),
                           color=_COLORS[foot], alpha=0.85)
            yticks.append(y)
            ylabels.append(f"env {env} {name}")
        end = int(trace.last_step()[env])
        if int(trace.first_done_step()[env]) != NEVER:
            ax.plot([(end + 1) * dt] * 2, [base - 0.5, base + 1.5], color="black", lw=2)
            ax.text((end + 1) * dt + 0.02, base + 0.5, "first done", va="center", fontsize=7)
        if bool(judgement.fell[env]):
            t = float(judgement.end_time_s()[env])
            ax.plot([t] * 2, [base - 0.5, base + 1.5], color="red", lw=2, ls="--")
    ax.set_yticks(yticks, ylabels, fontsize=8)
    # zoom on the windows shown: nothing after a first done is judged, and short falls would be slivers
    shown_end = max(int(trace.last_step()[env]) + 1 for env in envs) * dt
    right = min(trace.num_steps * dt, shown_end * 1.15 + 0.1)
    ax.set(xlim=(0, right), xlabel=f"time (s); horizon {trace.horizon_steps * dt:g} s",
           title=f"Raw foot contact (bars), first done (black), fall under '{judgement.thresholds.name}' (red dashed)")
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, path)


def plot_report(report, out_dir: str | os.PathLike, envs: list[int] | None = None) -> list[Path]:
    """Every picture of an :class:`~isaac_adapter.evaluation.evaluator.EvalReport` into ``out_dir``."""
    out = Path(out_dir)
    return [
        plot_survival(report.sweep, out / "survival.png"),
        plot_causes(report.sweep, out / "causes.png"),
        plot_first_crossings(report.sweep, out / "first_crossings.png"),
        plot_contact_timeline(report.trace, report.judgement, out / "foot_contacts.png", envs),
    ]


__all__ = ["plot_causes", "plot_contact_timeline", "plot_first_crossings", "plot_report", "plot_survival"]
