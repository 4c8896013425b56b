"""Per-step traces of an evaluation rollout, and the first-done window every metric is computed over.

A :class:`RolloutTrace` holds, for each policy step ``t`` (0-based) and env ``n``, what the robot
looked like right *after* that step and *before* any same-step auto-reset. For an env that ended at
step ``t`` the row therefore shows the terminal state (from the env's terminal snapshot), never the
spawn pose of the next episode.

First-done freeze: an env's metrics stop at its first done. :func:`first_episode_mask` marks the
steps ``t <= first_done_step[n]`` (every step when the env never ended); every metric in this package
is computed over that mask only, so a later episode in the same env never adds displacement,
length or falls.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, fields

import torch

from ppo_bootstrap.episode import done_mask

from isaac_adapter.tasks.g1_walk.causes import NEVER  # step index of an event that did not happen inside the trace


@dataclass
class StepSample:
    """What the evaluator reads from the env after one step, every env, pre-reset. ``N`` envs, ``F`` feet, ``J`` joints.

    Attributes:
        root_pos_w: ``[N, 3]`` root position, world frame (m).
        tilt_xy: ``[N]`` squared horizontal components of the body-frame gravity unit vector
            (0 upright, 1 lying flat); the quantity the G1 task's tilt rule thresholds.
        lin_vel_b: ``[N, 3]`` root linear velocity, body frame (m/s); column 1 is the lateral velocity.
        ang_vel_b: ``[N, 3]`` root angular velocity, body frame (rad/s).
        foot_contact: ``[N, F]`` bool, foot touches the ground (column 0 left, 1 right).
        torque: ``[N, J]`` applied joint torques (N m).
        command: ``[N, 3]`` velocity command ``(v_x, v_y, w_z)``, body frame, of the episode the row belongs to.
        env_cause: ``[N]`` long, the env's exclusive episode-end cause code of this step (0 = none).
        action: optional ``[N, A]`` action the step applied (policy units, after the task's clip);
            None when the probe does not record it. Only the gate's smoothness metrics read it.
        joint_vel: optional ``[N, J]`` joint velocities (rad/s), same rule as ``action``.
        pushed: optional ``[N]`` bool, the env's robot was kicked during this step (the task's
            pushes); None when the task does not push. The robustness gate reads it.
    """

    root_pos_w: torch.Tensor
    tilt_xy: torch.Tensor
    lin_vel_b: torch.Tensor
    ang_vel_b: torch.Tensor
    foot_contact: torch.Tensor
    torque: torch.Tensor
    command: torch.Tensor
    env_cause: torch.Tensor
    action: torch.Tensor | None = None
    joint_vel: torch.Tensor | None = None
    pushed: torch.Tensor | None = None


@dataclass(kw_only=True)
class RolloutTrace(StepSample):
    """A whole evaluation rollout: ``T`` policy steps of ``N`` envs, each field ``[T, N, ...]``: the
    :class:`StepSample` fields (``root_pos_w`` ... ``env_cause``, optional ``action`` / ``joint_vel``)
    stacked over steps, and what the rollout adds.

    Attributes:
        dt: policy step (s); step ``t`` ends at time ``(t + 1) * dt``.
        start_pos_w: ``[N, 3]`` root position right after the initial reset.
        reward: ``[T, N]``.
        terminated, truncated: ``[T, N]`` bool, as the env reported them.
        horizon_steps: the horizon the rollout was asked for; ``T`` may be smaller when the
            evaluator stopped early because every env had already ended once.
    """

    dt: float
    start_pos_w: torch.Tensor
    reward: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    horizon_steps: int

    @property
    def num_steps(self) -> int:
        return self.terminated.shape[0]

    @property
    def num_envs(self) -> int:
        return self.terminated.shape[1]

    @property
    def base_height(self) -> torch.Tensor:
        """``[T, N]`` root height (m)."""
        return self.root_pos_w[..., 2]

    @property
    def lateral_vel(self) -> torch.Tensor:
        """``[T, N]`` body-frame lateral velocity (m/s), signed."""
        return self.lin_vel_b[..., 1]

    def first_done_step(self) -> torch.Tensor:
        """``[N]`` long: step index of each env's first done, :data:`NEVER` if it never ended."""
        return first_done_step(self.terminated, self.truncated)

    def window(self) -> torch.Tensor:
        """``[T, N]`` bool: the first-done window (see :func:`first_episode_mask`)."""
        return first_episode_mask(self.terminated, self.truncated)

    def last_step(self) -> torch.Tensor:
        """``[N]`` long: the last step inside each env's window (its first done, else ``T - 1``)."""
        first = self.first_done_step()
        return torch.where(first == NEVER, self.num_steps - 1, first)

    def fingerprint(self) -> str:
        """Short hash of every recorded tensor: equal fingerprints mean identical rollouts."""
        digest = hashlib.sha256()
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, torch.Tensor):
                digest.update(value.detach().cpu().contiguous().numpy().tobytes())
        return digest.hexdigest()[:12]


def first_done_step(terminated: torch.Tensor, truncated: torch.Tensor) -> torch.Tensor:
    """``[N]`` long: first step ``t`` with ``terminated | truncated`` per env, :data:`NEVER` if none.

    Args:
        terminated, truncated: ``[T, N]`` bool.
    """
    done = done_mask(terminated, truncated)
    steps = torch.arange(done.shape[0], device=done.device).unsqueeze(-1).expand_as(done)
    big = torch.full_like(steps, done.shape[0])
    first = torch.where(done, steps, big).amin(dim=0)
    return torch.where(first == done.shape[0], NEVER, first)


def first_episode_mask(terminated: torch.Tensor, truncated: torch.Tensor) -> torch.Tensor:
    """``[T, N]`` bool: steps that belong to each env's first episode (up to and including its first done).

    Args:
        terminated, truncated: ``[T, N]`` bool.
    """
    first = first_done_step(terminated, truncated)
    last = torch.where(first == NEVER, terminated.shape[0] - 1, first)
    steps = torch.arange(terminated.shape[0], device=terminated.device).unsqueeze(-1)
    return steps <= last.unsqueeze(0)


def at_step(values: torch.Tensor, step: torch.Tensor) -> torch.Tensor:
    """Per-env value at a per-env step: ``values`` ``[T, N, ...]``, ``step`` ``[N]`` -> ``[N, ...]``."""
    env = torch.arange(values.shape[1], device=values.device)
    return values[step.clamp_min(0), env]


def _cpu_copy(value: torch.Tensor | None) -> torch.Tensor | None:
    return None if value is None else value.detach().cpu().clone()


def _stack(rows: list[torch.Tensor | None], name: str) -> torch.Tensor | None:
    """``[T, ...]`` stack of one field's rows; None when no row has it (an optional field left out)."""
    missing = sum(row is None for row in rows)
    if missing == len(rows):
        return None
    if missing:
        raise ValueError(f"field {name!r} is recorded at some steps only")
    return torch.stack(rows)


class TraceBuilder:
    """Accumulates :class:`StepSample` rows into a :class:`RolloutTrace` (preallocated ``[T, N, ...]``)."""

    def __init__(self, horizon_steps: int, dt: float, start_pos_w: torch.Tensor) -> None:
        self.horizon_steps, self.dt = horizon_steps, dt
        self.start_pos_w = start_pos_w.detach().cpu().clone()
        self._rows: list[tuple[StepSample, torch.Tensor, torch.Tensor, torch.Tensor]] = []

    def add(self, sample: StepSample, reward: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor) -> None:
        """Append step ``len(self)``; tensors are copied to the CPU (the env may reuse its buffers)."""
        if len(self._rows) >= self.horizon_steps:
            raise ValueError(f"trace already holds the horizon of {self.horizon_steps} steps")
        cpu = StepSample(**{f.name: _cpu_copy(getattr(sample, f.name)) for f in fields(sample)})
        self._rows.append((cpu, reward.detach().cpu().float().clone(), terminated.cpu().bool().clone(), truncated.cpu().bool().clone()))

    def __len__(self) -> int:
        return len(self._rows)

    def build(self) -> RolloutTrace:
        if not self._rows:
            raise ValueError("no step recorded")
        stacked = {f.name: _stack([getattr(row[0], f.name) for row in self._rows], f.name) for f in fields(StepSample)}
        stacked["foot_contact"] = stacked["foot_contact"].bool()
        return RolloutTrace(
            dt=self.dt,
            start_pos_w=self.start_pos_w,
            reward=torch.stack([row[1] for row in self._rows]),
            terminated=torch.stack([row[2] for row in self._rows]),
            truncated=torch.stack([row[3] for row in self._rows]),
            horizon_steps=self.horizon_steps,
            **stacked,
        )
