"""Episode dataset: rollouts as Parquet rows that keep every episode boundary and its meaning.

One row per env per policy step, in rollout order. Columns:

=========================  ==========================================================================
``env_id``                 int32, the vectorized env slot
``episode_id``             int64, unique across envs and resets: a post-reset step starts a new id
``step``                   int32, step index inside the episode (0 on its first row)
``rollout_step``           int32, step index of the whole rollout (aligns envs in time)
``time_s``                 float64, episode time of the row's observation: ``step * dt``
``observation``            fixed-size list<float32>, the policy observation the action was taken on
``observation_<group>``    the same for every other recorded group (e.g. ``observation_critic``)
``action``                 fixed-size list<float32>
``reward``                 float32
``terminated``             bool, the episode ended in a terminal state (a fall)
``truncated``              bool, an outside budget (the env's time limit) ended it; both may be set
``termination_cause``      string, ``"none"`` except on an ended episode's last row
``terminal_observation``   the true last observation (captured before the auto-reset), on the last
                           row of every ended episode, else null; ``terminal_observation_<group>`` too
``horizon_end``            bool, last row of an episode still running when the recording stopped; its
                           ``terminal_observation`` is the observation after that step (an evaluation
                           horizon is an outside budget, but the env did not report it, so
                           ``truncated`` stays as the env said)
=========================  ==========================================================================

The file is written to a temporary name in the same directory and moved into place with
``os.replace`` on :meth:`EpisodeDatasetWriter.close`: a crash never leaves a half-written file at the
destination. :func:`read_episodes` returns whole episodes and checks their boundaries.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ppo_bootstrap.env import POLICY, ObsGroups, StepResult
from ppo_bootstrap.episode import done_mask, final_rows

if TYPE_CHECKING:  # pyarrow (the eval extra) is imported where a dataset is written or read, so
    import pyarrow as pa  # the evaluator runs without it
    import pyarrow.parquet as pq

FORMAT = "ppo_bootstrap.episodes/1"


def _column_name(prefix: str, group: str) -> str:
    return prefix if group == POLICY else f"{prefix}_{group}"


def _fixed_list(values: np.ndarray, mask: np.ndarray | None = None) -> pa.Array:
    """``[R, D]`` float array as a fixed-size list column; ``mask`` ``[R]`` marks null rows."""
    import pyarrow as pa
    flat = pa.array(np.ascontiguousarray(values, dtype=np.float32).reshape(-1))
    return pa.FixedSizeListArray.from_arrays(flat, values.shape[1], mask=None if mask is None else pa.array(mask))


class EpisodeDatasetWriter:
    """Streams rollout steps into a Parquet file (schema in the module docstring).

    Usage::

        with EpisodeDatasetWriter("episodes.parquet", num_envs, dt) as writer:
            for t in range(T):
                result = env.step(actions)
                writer.add_step(obs, actions, result, cause=result.info["termination_cause"])
                obs = result.obs

    Args:
        path: destination; written atomically on :meth:`close`.
        num_envs: ``N``.
        dt: policy step (s), for ``time_s``.
        groups: observation groups to record; ``"policy"`` is the ``observation`` column.
        cause_names: names of the env's cause codes (index = code); without cause codes the
            writer names ends ``"terminated"`` or ``"truncated"``.
        metadata: JSON-serializable extras stored in the file's schema metadata.
        flush_rows: rows buffered before a row group is written.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        num_envs: int,
        dt: float,
        groups: tuple[str, ...] = (POLICY,),
        cause_names: tuple[str, ...] | None = None,
        metadata: dict[str, Any] | None = None,
        flush_rows: int = 65536,
    ) -> None:
        self.path = Path(path)
        self.tmp_path = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
        self.num_envs, self.dt, self.groups = num_envs, dt, groups
        self.cause_names = cause_names
        self.metadata = {"format": FORMAT, "dt": dt, "num_envs": num_envs, **(metadata or {})}
        self.flush_rows = flush_rows
        self.episode_id = np.arange(num_envs, dtype=np.int64)  # env n starts episode n
        self.next_episode_id = num_envs
        self.episode_step = np.zeros(num_envs, dtype=np.int32)
        self.rollout_step = 0
        self._buffer: list[dict[str, Any]] = []  # per-step column chunks already final
        self._pending: dict[str, Any] | None = None  # the latest step: close() may still mark it
        self._writer: pq.ParquetWriter | None = None
        self._closed = False

    # -- feeding --------------------------------------------------------------------------------

    def add_step(
        self,
        obs: ObsGroups,
        actions: torch.Tensor,
        result: StepResult,
        cause: torch.Tensor | None = None,
    ) -> None:
        """Record one step of every env: ``obs`` the observations the ``actions`` ``[N, A]`` were
        taken on, ``result`` what ``env.step`` returned, ``cause`` ``[N]`` long cause codes (optional)."""
        if self._closed:
            raise RuntimeError("writer is closed")
        n = self.num_envs
        terminated = result.terminated.detach().cpu().numpy().astype(bool)
        truncated = result.truncated.detach().cpu().numpy().astype(bool)
        ended = done_mask(terminated, truncated)
        final_env_ids, final_obs = final_rows(result)
        final_ids = final_env_ids.detach().cpu().numpy()
        if not np.array_equal(np.flatnonzero(ended), final_ids):
            raise ValueError(f"final_env_ids {final_ids.tolist()} differ from the ended envs {np.flatnonzero(ended).tolist()}")

        chunk: dict[str, Any] = {
            "env_id": np.arange(n, dtype=np.int32),
            "episode_id": self.episode_id.copy(),
            "step": self.episode_step.copy(),
            "rollout_step": np.full(n, self.rollout_step, dtype=np.int32),
            "time_s": self.episode_step.astype(np.float64) * self.dt,
            "action": actions.detach().cpu().float().numpy(),
            "reward": result.reward.detach().cpu().float().numpy(),
            "terminated": terminated,
            "truncated": truncated,
            "termination_cause": self._cause_strings(terminated, truncated, cause),
            "horizon_end": np.zeros(n, dtype=bool),
        }
        for group in self.groups:
            chunk[_column_name("observation", group)] = obs[group].detach().cpu().float().numpy()
            terminal = np.zeros_like(chunk[_column_name("observation", group)])
            terminal[final_ids] = final_obs[group].detach().cpu().float().numpy()
            chunk[_column_name("terminal_observation", group)] = terminal
        chunk["_has_terminal"] = ended.copy()
        # observations after the step: the terminal observation of an episode the horizon cuts here
        chunk["_next_obs"] = {g: result.obs[g].detach().cpu().float().numpy() for g in self.groups}

        if self._pending is not None:
            self._buffer.append(self._pending)
        self._pending = chunk
        if sum(len(c["env_id"]) for c in self._buffer) >= self.flush_rows:
            self._flush()

        # a post-reset step starts a new episode: new id, step 0
        for env in np.flatnonzero(ended):
            self.episode_id[env] = self.next_episode_id
            self.next_episode_id += 1
        self.episode_step = np.where(ended, 0, self.episode_step + 1).astype(np.int32)
        self.rollout_step += 1

    def _cause_strings(self, terminated: np.ndarray, truncated: np.ndarray, cause: torch.Tensor | None) -> np.ndarray:
        ended = done_mask(terminated, truncated)
        if cause is not None and self.cause_names is not None:
            codes = cause.detach().cpu().numpy()
            names = np.array([self.cause_names[int(c)] for c in codes], dtype=object)
        else:
            names = np.where(terminated, "terminated", np.where(truncated, "truncated", "none")).astype(object)
        return np.where(ended, names, "none").astype(object)

    # -- writing --------------------------------------------------------------------------------

    def _table(self, chunks: list[dict[str, Any]]) -> pa.Table:
        import pyarrow as pa
        def cat(key: str) -> np.ndarray:
            return np.concatenate([c[key] for c in chunks])

        has_terminal = cat("_has_terminal")
        columns: dict[str, pa.Array] = {}
        for key in ("env_id", "episode_id", "step", "rollout_step", "time_s"):
            columns[key] = pa.array(cat(key))
        for group in self.groups:
            columns[_column_name("observation", group)] = _fixed_list(cat(_column_name("observation", group)))
        columns["action"] = _fixed_list(cat("action"))
        columns["reward"] = pa.array(cat("reward"))
        columns["terminated"] = pa.array(cat("terminated"))
        columns["truncated"] = pa.array(cat("truncated"))
        columns["termination_cause"] = pa.array(cat("termination_cause").tolist(), type=pa.string())
        for group in self.groups:
            name = _column_name("terminal_observation", group)
            columns[name] = _fixed_list(cat(name), mask=~has_terminal)
        columns["horizon_end"] = pa.array(cat("horizon_end"))
        table = pa.table(columns)
        return table.replace_schema_metadata({"episodes": json.dumps(self.metadata)})

    def _flush(self) -> None:
        import pyarrow.parquet as pq
        if not self._buffer:
            return
        table = self._table(self._buffer)
        if self._writer is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._writer = pq.ParquetWriter(self.tmp_path, table.schema)
        self._writer.write_table(table)
        self._buffer = []

    def close(self) -> Path:
        """Mark episodes cut by the end of recording, write the rest, move the file into place."""
        if self._closed:
            return self.path
        pending = self._pending
        if pending is not None:
            open_envs = ~pending["_has_terminal"]
            pending["horizon_end"] = open_envs.copy()
            for group in self.groups:
                name = _column_name("terminal_observation", group)
                pending[name][open_envs] = pending["_next_obs"][group][open_envs]
            pending["_has_terminal"] = np.ones_like(open_envs)
            self._buffer.append(pending)
            self._pending = None
        self._flush()
        if self._writer is None:
            raise ValueError("no step was recorded")
        self._writer.close()
        with open(self.tmp_path, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(self.tmp_path, self.path)
        self._closed = True
        return self.path

    def abort(self) -> None:
        """Drop everything: the destination keeps whatever it held before."""
        if self._writer is not None:
            self._writer.close()
        self.tmp_path.unlink(missing_ok=True)
        self._closed = True

    def __enter__(self) -> EpisodeDatasetWriter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


# -- reading ------------------------------------------------------------------------------------


@dataclass
class Episode:
    """One whole episode, ``L`` rows. Arrays are numpy; observation groups other than policy in ``extra``."""

    env_id: int
    episode_id: int
    step: np.ndarray  # [L] int, 0..L-1
    rollout_step: np.ndarray  # [L] int
    time_s: np.ndarray  # [L]
    observation: np.ndarray  # [L, D]
    action: np.ndarray  # [L, A]
    reward: np.ndarray  # [L]
    terminated: np.ndarray  # [L] bool, only the last row may be true
    truncated: np.ndarray  # [L] bool
    termination_cause: str  # of the last row
    terminal_observation: np.ndarray | None  # [D], None only for an episode the file cut mid-way
    horizon_end: bool
    extra: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def length(self) -> int:
        return int(self.step.shape[0])

    @property
    def ended(self) -> bool:
        return bool(self.terminated[-1] or self.truncated[-1])


def read_metadata(path: str | os.PathLike) -> dict[str, Any]:
    import pyarrow.parquet as pq
    meta = pq.read_schema(path).metadata or {}
    return json.loads(meta.get(b"episodes", b"{}"))


def _matrix(column: pa.ChunkedArray) -> np.ndarray:
    """Fixed-size list column (no nulls) as ``[R, D]`` float32."""
    array = column.combine_chunks()
    return array.flatten().to_numpy(zero_copy_only=False).reshape(len(array), array.type.list_size)


def read_episodes(path: str | os.PathLike) -> list[Episode]:
    """Every episode of the file, whole and sorted by ``episode_id``; raises ``ValueError`` on a broken boundary."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    table = pq.read_table(path)
    order = np.lexsort((table["step"].to_numpy(), table["episode_id"].to_numpy()))
    table = table.take(pa.array(order))
    episode_ids = table["episode_id"].to_numpy()
    boundaries = np.flatnonzero(np.diff(episode_ids)) + 1
    starts = np.concatenate([[0], boundaries])
    ends = np.concatenate([boundaries, [len(episode_ids)]])
    groups = [name for name in table.column_names if name.startswith("observation")]
    episodes = []
    for start, end in zip(starts.tolist(), ends.tolist()):
        rows = table.slice(start, end - start)
        step = rows["step"].to_numpy()
        env_ids = np.unique(rows["env_id"].to_numpy())
        terminated = rows["terminated"].to_numpy(zero_copy_only=False)
        truncated = rows["truncated"].to_numpy(zero_copy_only=False)
        episode_id = int(episode_ids[start])
        if len(env_ids) != 1:
            raise ValueError(f"episode {episode_id} spans envs {env_ids.tolist()}")
        if not np.array_equal(step, np.arange(len(step))):
            raise ValueError(f"episode {episode_id} has steps {step.tolist()[:10]}..., not 0..{len(step) - 1}")
        if (terminated[:-1] | truncated[:-1]).any():
            raise ValueError(f"episode {episode_id} continues after an end")
        terminal = {}
        for name in groups:
            column = rows[f"terminal_{name}"].combine_chunks()
            last = column[len(column) - 1]
            terminal[name] = None if not last.is_valid else np.asarray(last.as_py(), dtype=np.float32)
        episodes.append(
            Episode(
                env_id=int(env_ids[0]),
                episode_id=episode_id,
                step=step,
                rollout_step=rows["rollout_step"].to_numpy(),
                time_s=rows["time_s"].to_numpy(),
                observation=_matrix(rows["observation"]),
                action=_matrix(rows["action"]),
                reward=rows["reward"].to_numpy(),
                terminated=terminated,
                truncated=truncated,
                termination_cause=str(rows["termination_cause"][len(step) - 1].as_py()),
                terminal_observation=terminal["observation"],
                horizon_end=bool(rows["horizon_end"][len(step) - 1].as_py()),
                extra={name: _matrix(rows[name]) for name in groups if name != "observation"}
                | {f"terminal_{name}": terminal[name] for name in groups if name != "observation"},
            )
        )
    return episodes
