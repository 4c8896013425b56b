"""Where a training run's statistics go: TensorBoard events and ``metrics.jsonl`` in the run folder,
and a block on the console after each iteration.

:class:`LogSums` adds up an env's ``info["log"]`` over a rollout; :class:`EpisodeStats` follows the
episodes' returns and lengths; :class:`Logger` writes an iteration's statistics; :func:`read_metrics`
reads ``metrics.jsonl`` back.

* ``metrics.jsonl``: one JSON object per iteration under this library's keys (``loss/value``,
  ``perf/steps_per_s``, ``episodes/mean_return_100``, ``env/<the env's log key>``, ...).
* TensorBoard: the scalars that rsl_rl also logs under rsl_rl's tags (:data:`TENSORBOARD_TAGS`:
  ``Loss/value``, ``Train/mean_reward``, ``Perf/total_fps``, ``Policy/mean_std``, ...), the env's
  logs under their own keys as rsl_rl does (``Episode_Reward/*``, ``Episode_Termination/*``; a key
  without ``/`` as ``Episode/<key>``), everything else under its ``metrics.jsonl`` key.
* Console (``RunnerConfig.console``): ``"compact"`` (default, ``True``) about 15-20 lines in rsl_rl's
  shape (:func:`format_compact`), ``"full"`` every statistic and env log (:func:`format_progress`),
  ``"off"`` (``False``) nothing. Both blocks end with the elapsed time and the ETA.
"""

from __future__ import annotations

import collections
import os
import time
from pathlib import Path
from collections.abc import Callable
from typing import Any, Literal

import torch

from ppo_bootstrap import disk

ConsoleMode = Literal["compact", "full", "off"]
CONSOLE_MODES: tuple[str, ...] = ("compact", "full", "off")

TENSORBOARD_TAGS: dict[str, str] = {
    "loss/value": "Loss/value",
    "loss/surrogate": "Loss/surrogate",
    "loss/entropy": "Loss/entropy",
    "loss/symmetry": "Loss/symmetry",
    "policy/learning_rate": "Loss/learning_rate",
    "policy/mean_action_std": "Policy/mean_std",
    "perf/steps_per_s": "Perf/total_fps",
    "perf/collection_s": "Perf/collection_time",
    "perf/learning_s": "Perf/learning_time",
    "episodes/mean_return_100": "Train/mean_reward",
    "episodes/mean_length_100": "Train/mean_episode_length",
}
"""``metrics.jsonl`` key -> the TensorBoard tag rsl_rl (rsl-rl-lib 5.5) gives the same scalar."""
OLDER_TENSORBOARD_TAGS: dict[str, str] = {
    "loss/value": "Loss/value_function",
    "policy/mean_action_std": "Policy/mean_noise_std",
    "perf/collection_s": "Perf/collection time",
}
"""The same scalars under rsl-rl-lib 2.x-3.x's tags (Isaac Lab 2's runs), written too so that either
kind of run lies beside ours in TensorBoard."""
ENV_LOG_PREFIX = "env/"


def tensorboard_tag(key: str) -> str:
    """The TensorBoard tag of a statistic: rsl_rl's where it logs the same scalar, an env log key
    as the env named it (``Episode/<key>`` for one without ``/``, as rsl_rl), else ``key`` itself."""
    if key in TENSORBOARD_TAGS:
        return TENSORBOARD_TAGS[key]
    if key.startswith(ENV_LOG_PREFIX):
        name = key.removeprefix(ENV_LOG_PREFIX)
        return name if "/" in name else f"Episode/{name}"
    return key


def tensorboard_tags(key: str) -> tuple[str, ...]:
    """Every tag a statistic is written under: :func:`tensorboard_tag`, and rsl_rl's older one where it differs."""
    older = OLDER_TENSORBOARD_TAGS.get(key)
    return (tensorboard_tag(key),) if older is None else (tensorboard_tag(key), older)


def console_mode(value: ConsoleMode | bool | str) -> ConsoleMode:
    """``RunnerConfig.console`` as one of :data:`CONSOLE_MODES`: ``True`` is ``"compact"``, ``False``
    ``"off"`` (also spelled ``"true"`` / ``"false"``, as a command-line override may give them)."""
    text = str(value).lower()
    mode = {"true": "compact", "false": "off"}.get(text, text)
    if mode not in CONSOLE_MODES:
        raise ValueError(f"console must be one of {', '.join(CONSOLE_MODES)} (or true / false), got {value!r}")
    return mode  # type: ignore[return-value]


class LogSums:
    """Sums of the scalars of ``info["log"]`` over a rollout, read once at its end.

    An env logs the same keys at every step (the G1 task logs about 45): their tensors are stacked
    and added as one vector, two kernel launches per step instead of one per key, and read with one
    host synchronisation. Python numbers are summed on the host; a step with other tensor keys
    folds the running vector into per-key sums and starts a new one.
    """

    def __init__(self) -> None:
        self._keys: tuple[str, ...] = ()
        self._vector: torch.Tensor | None = None
        self._done: list[tuple[tuple[str, ...], torch.Tensor]] = []  # vectors of earlier key sets
        self._host: dict[str, float] = {}

    def add(self, log: dict[str, Any]) -> None:
        keys = tuple(k for k, v in log.items() if isinstance(v, torch.Tensor))
        for key, value in log.items():
            if not isinstance(value, torch.Tensor):
                self._host[key] = self._host.get(key, 0.0) + float(value)
        if not keys:
            return
        # float32 as the env logs them (a cast per key would cost the launch the stack saves)
        values = [v.reshape(()) if v.dtype == torch.float32 else v.reshape(()).float() for v in map(log.get, keys)]
        if keys != self._keys or self._vector is None or values[0].device != self._vector.device:
            if self._vector is not None:
                self._done.append((self._keys, self._vector))
            self._keys, self._vector = keys, torch.zeros(len(keys), device=values[0].device)
        self._vector += torch.stack(values)

    def totals(self) -> dict[str, float]:
        """``{key: sum over the steps that logged it}``; one host synchronisation per key set."""
        out = dict(self._host)
        vectors = self._done + ([(self._keys, self._vector)] if self._vector is not None else [])
        for keys, vector in vectors:
            for key, value in zip(keys, vector.tolist()):
                out[key] = out.get(key, 0.0) + value
        return out

    def means(self, steps: int) -> dict[str, float]:
        """``{key: sum / steps}``: each key's mean per step of a rollout of ``steps`` (what the runner logs)."""
        return {key: value / steps for key, value in self.totals().items()}


class EpisodeStats:
    """Return and length of each env's episode in progress, and of the last ``window`` that ended.

    ``returns``, ``lengths``: ``[N]`` on the learner's device, carried over rollouts (and checkpoints);
    ``recent``: ``(return, length)`` of the last ``window`` ended episodes, over all rollouts.
    """

    def __init__(self, num_envs: int, device: torch.device, window: int = 100) -> None:
        self.returns = torch.zeros(num_envs, device=device)
        self.lengths = torch.zeros(num_envs, device=device)
        self.recent: collections.deque[tuple[float, float]] = collections.deque(maxlen=window)
        self._ends: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []  # per step: done, return, length

    def step(self, reward: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
        """Add a step's ``reward`` ``[N]``; the episodes ``done`` ``[N]`` end with it. Returns each
        episode's length with this step ``[N]`` (before the ended ones restart at 0)."""
        self.returns += reward
        self.lengths += 1
        lengths = self.lengths.clone()
        self._ends.append((done, self.returns.clone(), lengths))
        keep = (~done).to(torch.float32)
        self.returns *= keep
        self.lengths *= keep
        return lengths

    def end_rollout(self) -> dict[str, float]:
        """``episodes/ended``, and the mean return and length of the episodes that ended since the last
        call; they join :attr:`recent`. One host sync per rollout."""
        done = torch.stack([d for d, _, _ in self._ends])
        returns = torch.stack([r for _, r, _ in self._ends])[done]
        lengths = torch.stack([n for _, _, n in self._ends])[done]
        self._ends = []
        self.recent.extend(zip(returns.tolist(), lengths.tolist()))
        n = float(returns.numel())
        stats = {"episodes/ended": n}
        if n:
            stats["episodes/mean_return"] = float(returns.sum()) / n
            stats["episodes/mean_length"] = float(lengths.sum()) / n
        return stats

    def recent_means(self) -> dict[str, float]:
        """Mean return and length over :attr:`recent` (nothing before an episode has ended)."""
        if not self.recent:
            return {}
        returns, lengths = zip(*self.recent)
        return {"episodes/mean_return_100": sum(returns) / len(returns),
                "episodes/mean_length_100": sum(lengths) / len(lengths)}


class Logger:
    """Writes each iteration's statistics on rank 0 (other ranks write nothing).

    ``log_dir``: TensorBoard events (the writer opens at the first iteration; tags from
    :func:`tensorboard_tag`) and ``metrics.jsonl``, one JSON object per iteration, appended; ``None``
    writes no files. ``console``: :data:`ConsoleMode` (or a bool, :func:`console_mode`).
    """

    def __init__(self, log_dir: str | None, console: ConsoleMode | bool, rank: int = 0,
                 last_checkpoint: Callable[[], Path | None] = lambda: None) -> None:
        self.log_dir, self.console, self.rank = log_dir, console_mode(console), rank
        self._last_checkpoint = last_checkpoint
        self._writer: disk.RunLog | None = None
        self._started = time.perf_counter()
        self._first_iteration = self._final_iteration = 0

    def start(self, iteration: int, iterations: int) -> None:
        """A ``learn`` call begins at ``iteration`` and runs ``iterations`` more: the clock for elapsed and ETA."""
        self._started = time.perf_counter()
        self._first_iteration, self._final_iteration = iteration, iteration + iterations

    def log(self, iteration: int, total_steps: int, stats: dict[str, float]) -> None:
        """Add ``perf/elapsed_s`` and ``perf/eta_s`` to ``stats`` and write them (rank 0)."""
        elapsed = time.perf_counter() - self._started
        done_here = iteration - self._first_iteration
        stats["perf/elapsed_s"] = elapsed
        stats["perf/eta_s"] = elapsed / done_here * (self._final_iteration - iteration)
        if self.rank != 0:
            return
        if self.log_dir:  # metrics.jsonl and TensorBoard; a full disk warns once (ppo_bootstrap.disk)
            self._writer = self._writer or disk.RunLog(self.log_dir, self._last_checkpoint, tensorboard_tags)
            self._writer.write(iteration, total_steps, stats)
        if self.console != "off":
            block = format_progress if self.console == "full" else format_compact
            print(block(iteration, self._final_iteration, total_steps, stats), flush=True)


def read_metrics(log_dir: str | os.PathLike) -> list[dict[str, float]]:
    """The rows of ``log_dir/metrics.jsonl`` in iteration order, one per iteration.

    A run resumed from a checkpoint older than its last logged iteration logs those iterations
    again; the later row of an iteration is the one the resumed run continued from, so it wins.
    A row cut off by a full disk or a killed writer is skipped, with a warning.
    Each row gains ``train_s``: the Runner's collection and update seconds summed up to and
    including it (start-up, kernel compilation and checkpoint writes are not in it).
    """
    rows = {int(row["iteration"]): row for row in disk.read_rows(Path(log_dir) / disk.METRICS)}  # torn rows skipped
    train_s = 0.0
    out = []
    for iteration in sorted(rows):
        row = rows[iteration]
        train_s += row["perf/collection_s"] + row["perf/learning_s"]
        out.append({**row, "train_s": train_s})
    return out


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _block(iteration: int, final_iteration: int, rows: list[tuple[str, str]], env_rows: list[tuple[str, str]],
           clock: list[tuple[str, str]], env_title: str) -> str:
    """Rows under a ``Learning iteration i/n`` banner, right-aligned names; env rows under their own rule."""
    label = max(len(name) for name, _ in rows + env_rows + clock) + 2
    width = max(72, label + 40)
    lines = [f" Learning iteration {iteration}/{final_iteration} ".center(width, "#")]
    lines += [f"{name:>{label}}: {value}" for name, value in rows]
    if env_rows:
        lines.append(f" {env_title} ".center(width, "-"))
        lines += [f"{name:>{label}}: {value}" for name, value in env_rows]
    lines.append("-" * width)
    lines += [f"{name:>{label}}: {value}" for name, value in clock]
    return "\n".join(lines)


def _clock_rows(total_steps: int, stats: dict[str, float]) -> list[tuple[str, str]]:
    clock = [("total env steps", f"{total_steps:,}"),
             ("iteration time", f"{stats['perf/collection_s'] + stats['perf/learning_s']:.2f} s")]
    if "perf/elapsed_s" in stats:
        clock += [("elapsed", _clock(stats["perf/elapsed_s"])), ("ETA", _clock(stats["perf/eta_s"]))]
    return clock


def _ends(stats: dict[str, float]) -> str:
    ended, falls, timeouts = stats["episodes/ended"], stats["episodes/terminated"], stats["episodes/truncated_only"]
    return f"{ended:.0f}: {falls:.0f} falls, {timeouts:.0f} timeouts"


COMPACT_ENV_ROWS = 4
"""How many env logs the compact block shows (``Episode_Termination/*`` first, in the env's order)."""


def format_compact(iteration: int, final_iteration: int, total_steps: int, stats: dict[str, float]) -> str:
    """The default console block, about rsl_rl's size (15-20 lines): throughput, losses, the last
    100 episodes, how this iteration's episodes ended, the first :data:`COMPACT_ENV_ROWS` env logs,
    then the run's clock with the ETA. ``RunnerConfig.console="full"`` prints :func:`format_progress`."""
    rows = [
        ("steps per second", f"{stats['perf/steps_per_s']:,.0f} (collection {stats['perf/collection_s']:.2f} s, "
                             f"learning {stats['perf/learning_s']:.2f} s)"),
        ("value / surrogate loss", f"{stats['loss/value']:.4f} / {stats['loss/surrogate']:.4f}"),
        ("mean action noise std", f"{stats['policy/mean_action_std']:.3f}" if "policy/mean_action_std" in stats else "-"),
    ]
    if "episodes/mean_return_100" in stats:
        # per step too: where most terms are penalties, a longer episode sums to a lower return
        # while every step of it got better (the G1 learning to stay up)
        ret, length = stats["episodes/mean_return_100"], stats["episodes/mean_length_100"]
        per_step = f" ({ret / length:.4f} per step)" if length else ""
        rows += [("mean reward (last 100 episodes)", f"{ret:.3f}{per_step}"),
                 ("mean episode length", f"{length:.1f} steps")]
    if "policy/kl" in stats:
        rows.append(("kl / learning rate", f"{stats['policy/kl']:.4f} / {stats['policy/learning_rate']:.2e}"))
    rows += [("episodes ended", _ends(stats)),
             ("timeout bootstrap gamma*V(s_final)", f"{stats['timeout_bootstrap/mean']:.3f}")]
    env = [(k.removeprefix(ENV_LOG_PREFIX), v) for k, v in stats.items() if k.startswith(ENV_LOG_PREFIX)]
    env.sort(key=lambda kv: not kv[0].startswith("Episode_Termination/"))  # stable: the env's order otherwise
    env_rows = [(name, f"{value:.4f}") for name, value in env[:COMPACT_ENV_ROWS]]
    title = "env logs, mean per policy step"
    if len(env) > COMPACT_ENV_ROWS:
        title += f" ({len(env) - COMPACT_ENV_ROWS} more: console='full')"
    return _block(iteration, final_iteration, rows, env_rows, _clock_rows(total_steps, stats), title)


def format_progress(iteration: int, final_iteration: int, total_steps: int, stats: dict[str, float]) -> str:
    """The console block printed after each iteration, in rsl_rl's shape: what the iteration cost,
    how the episodes end (falls apart from timeouts) and what the value target added at timeouts,
    then the env's own logs and the run's clock."""
    ended, falls, timeouts = stats["episodes/ended"], stats["episodes/terminated"], stats["episodes/truncated_only"]
    per_end = f" (per ended episode: {falls / ended:.2f} falls, {timeouts / ended:.2f} timeouts)" if ended else ""
    rows = [
        ("computation", f"{stats['perf/steps_per_s']:,.0f} steps/s (collection {stats['perf/collection_s']:.2f} s, "
                        f"learning {stats['perf/learning_s']:.2f} s)"),
        ("mean action std", f"{stats['policy/mean_action_std']:.3f}" if "policy/mean_action_std" in stats else "-"),
    ]
    if "episodes/mean_return_100" in stats:
        rows += [("mean return (last 100 episodes)", f"{stats['episodes/mean_return_100']:.3f}"),
                 ("mean length (last 100 episodes)", f"{stats['episodes/mean_length_100']:.1f} steps")]
    rows += [
        ("episodes ended this iteration", _ends(stats) + per_end),
        ("timeout bootstrap gamma*V(s_final)", f"{stats['timeout_bootstrap/mean']:.3f} (mean over this iteration's timeouts)"),
        ("value / surrogate loss", f"{stats['loss/value']:.4f} / {stats['loss/surrogate']:.4f}"),
        ("entropy / kl / learning rate", f"{stats['loss/entropy']:.3f} / {stats['policy/kl']:.4f} / {stats['policy/learning_rate']:.2e}"),
    ]
    env_rows = [(k.removeprefix(ENV_LOG_PREFIX), f"{v:.4f}") for k, v in stats.items() if k.startswith(ENV_LOG_PREFIX)]
    return _block(iteration, final_iteration, rows, env_rows, _clock_rows(total_steps, stats),
                  "env logs, mean per policy step (Episode_Termination/*: ends per step)")
