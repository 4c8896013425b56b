"""Where a training run's statistics go: TensorBoard events and ``metrics.jsonl`` in the run folder,
and a block on the console after each iteration.

:class:`LogSums` adds up an env's ``info["log"]`` over a rollout; :class:`Logger` writes an
iteration's statistics; :func:`read_metrics` reads ``metrics.jsonl`` back.
"""

from __future__ import annotations

import collections
import json
import os
import time
from pathlib import Path
from typing import Any

import torch


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

    ``log_dir``: TensorBoard events (the writer opens at the first iteration) and ``metrics.jsonl``,
    one JSON object per iteration, appended; ``None`` writes no files. ``console``: print
    :func:`format_progress` after each iteration.
    """

    def __init__(self, log_dir: str | None, console: bool, rank: int = 0) -> None:
        self.log_dir, self.console, self.rank = log_dir, console, rank
        self._writer = None
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
        if self.log_dir:
            if self._writer is None:
                from torch.utils.tensorboard import SummaryWriter

                self._writer = SummaryWriter(log_dir=self.log_dir)
            for key, value in stats.items():
                self._writer.add_scalar(key, value, iteration)
            row = {"iteration": iteration, "total_steps": total_steps, "time": time.time(), **stats}
            with open(Path(self.log_dir) / "metrics.jsonl", "a") as f:
                f.write(json.dumps(row) + "\n")
        if self.console:
            print(format_progress(iteration, self._final_iteration, total_steps, stats), flush=True)


def read_metrics(log_dir: str | os.PathLike) -> list[dict[str, float]]:
    """The rows of ``log_dir/metrics.jsonl`` in iteration order, one per iteration.

    A run resumed from a checkpoint older than its last logged iteration logs those iterations
    again; the later row of an iteration is the one the resumed run continued from, so it wins.
    Each row gains ``train_s``: the Runner's collection and update seconds summed up to and
    including it (start-up, kernel compilation and checkpoint writes are not in it).
    """
    rows: dict[int, dict[str, float]] = {}
    with open(Path(log_dir) / "metrics.jsonl") as f:
        for line in f:
            row = json.loads(line)
            rows[int(row["iteration"])] = row
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


def format_progress(iteration: int, final_iteration: int, total_steps: int, stats: dict[str, float]) -> str:
    """The console block printed after each iteration, in rsl_rl's shape: what the iteration cost,
    how the episodes end (falls apart from timeouts) and what the value target added at timeouts,
    then the env's own logs and the run's clock."""
    ended = stats["episodes/ended"]
    falls, timeouts = stats["episodes/terminated"], stats["episodes/truncated_only"]
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
        ("episodes ended this iteration", f"{ended:.0f}: {falls:.0f} falls, {timeouts:.0f} timeouts{per_end}"),
        ("timeout bootstrap gamma*V(s_final)", f"{stats['timeout_bootstrap/mean']:.3f} (mean over this iteration's timeouts)"),
        ("value / surrogate loss", f"{stats['loss/value']:.4f} / {stats['loss/surrogate']:.4f}"),
        ("entropy / kl / learning rate", f"{stats['loss/entropy']:.3f} / {stats['policy/kl']:.4f} / {stats['policy/learning_rate']:.2e}"),
    ]
    env_rows = [(k.removeprefix("env/"), f"{v:.4f}") for k, v in stats.items() if k.startswith("env/")]
    clock = [("total env steps", f"{total_steps:,}"),
             ("iteration time", f"{stats['perf/collection_s'] + stats['perf/learning_s']:.2f} s")]
    if "perf/elapsed_s" in stats:
        clock += [("elapsed", _clock(stats["perf/elapsed_s"])), ("ETA", _clock(stats["perf/eta_s"]))]
    label = max(len(name) for name, _ in rows + env_rows + clock) + 2
    width = max(72, label + 40)
    lines = [f" Learning iteration {iteration}/{final_iteration} ".center(width, "#")]
    lines += [f"{name:>{label}}: {value}" for name, value in rows]
    if env_rows:
        lines.append(" env logs, mean per policy step (Episode_Termination/*: ends per step) ".center(width, "-"))
        lines += [f"{name:>{label}}: {value}" for name, value in env_rows]
    lines.append("-" * width)
    lines += [f"{name:>{label}}: {value}" for name, value in clock]
    return "\n".join(lines)
