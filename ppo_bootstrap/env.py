"""The vectorized-environment protocol the Runner consumes.

Every adapter (Isaac Lab, mjlab, Gymnasium, the embedded G1 task) produces exactly this, so the
storage and the algorithm never see simulator-specific conventions.

Contract, per ``step(actions)``:

* ``obs``: observation groups after the step. ``"policy"`` is required, ``"critic"`` is optional
  (privileged observations for an asymmetric critic). For envs that ended this step these are the
  observations of the *new* episode (same-step auto-reset, as in Isaac Lab and mjlab).
* ``reward`` ``[N]``: reward of the transition just taken.
* ``terminated`` ``[N]`` bool: the MDP reached a terminal state (a fall). No bootstrap.
* ``truncated`` ``[N]`` bool: an outside budget ran out (time limit). Bootstrap with ``V(final_obs)``.
  Both may be true; then terminated wins (see :mod:`ppo_bootstrap.episode`).
* ``final_env_ids`` ``[K]`` long: exactly the env ids with ``terminated | truncated``, ascending.
* ``final_obs``: the true last observation of those envs, captured *before* their reset, with the
  same groups as ``obs``; each tensor ``[K, ...]``, row ``k`` belongs to ``final_env_ids[k]``.
* or, instead of the two (both ``None``): ``final_obs_all``, the observation of *every* env before
  any reset, each tensor ``[N, ...]``; the rows of ended envs are their final observations. Finding
  the ``K`` ended ids is a host synchronisation on a GPU (a ``nonzero``); this dense form lets an
  env skip it on every step, and the storage keeps the rows without it (one ``nonzero`` per
  rollout). Whoever needs the ``[K]`` rows asks :func:`ppo_bootstrap.episode.final_rows`.
* ``info``: free-form extras (episode statistics, termination causes, ...). Scalars or ``[N]``
  tensors; the Runner logs keys under ``info["log"]`` as scalars.

``reset()`` resets all envs and returns the initial observation groups. Envs reset only the
``env_ids`` that ended; everything else is untouched.

Optional: ``reset_envs(env_ids)`` restarts the given envs ``[K]`` at once and returns their fresh
observation rows (``[K, ...]`` per group); the Runner uses it to recover from physics blow-ups
(``RunnerConfig.non_finite_obs="reset"``). ``state_dict()`` / ``load_state_dict()`` make resume
exact. ``max_episode_length`` (int) declares the time limit in policy steps: the Runner warns once
when an env runs past it without ``truncated``. ``info["time_outs"]`` ``[N]`` bool, where given,
must equal ``truncated``; the Runner warns once where it differs (time-outs sent as ``terminated``).

Every step's fields live on ``device``; observation groups and their per-env shapes are those of
``reset()``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import torch

ObsGroups = dict[str, torch.Tensor]
"""Observation groups: ``{"policy": [N, D_pi], "critic": [N, D_vf] (optional)}``."""

POLICY = "policy"
CRITIC = "critic"


@dataclass
class StepResult:
    """What one ``VecEnv.step`` returns. Shapes in the module docstring."""

    obs: ObsGroups
    reward: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    final_obs: ObsGroups | None
    final_env_ids: torch.Tensor | None
    info: dict[str, Any] = field(default_factory=dict)
    final_obs_all: ObsGroups | None = None


@runtime_checkable
class VecEnv(Protocol):
    """A batch of ``num_envs`` environments stepped together on ``device``."""

    num_envs: int
    num_actions: int
    device: torch.device

    def reset(self) -> ObsGroups:
        """Reset every env; return the initial observation groups."""
        ...

    def step(self, actions: torch.Tensor) -> StepResult:
        """Apply ``actions`` ``[N, A]`` (float, on ``device``) and advance one policy step."""
        ...


def critic_group(obs: ObsGroups) -> str:
    """The group the critic reads: the privileged one when the env provides it, else the policy's."""
    return CRITIC if CRITIC in obs else POLICY


def critic_obs(obs: ObsGroups) -> torch.Tensor:
    """The critic's input (the group :func:`critic_group` names)."""
    return obs[critic_group(obs)]


def on_device(tensor: torch.Tensor, device: str | torch.device) -> bool:
    """Whether ``tensor`` lives on ``device`` (``"cuda"`` without an index accepts any GPU)."""
    device = torch.device(device)
    return tensor.device.type == device.type and (device.index is None or tensor.device.index == device.index)


def check_actions(
    actions: torch.Tensor, num_envs: int, num_actions: int, device: torch.device, finite: bool = True
) -> torch.Tensor:
    """``actions`` detached from autograd, once checked; raise ``ValueError`` naming the problem
    unless they are a finite float ``[N, A]`` tensor on ``device``.

    Envs call this first in ``step`` and step on what it returns, so a wrong action never reaches
    the physics (a ``[1, A]`` tensor would otherwise broadcast silently to every env), and a policy
    output taken outside ``torch.no_grad`` steps exactly as the same values without grad (the
    physics never differentiates through a step; in-place and ``out=`` writes of such a tensor would
    fail half-way through it). The finiteness check (``finite``) is the only part that costs a host
    synchronisation.
    """
    if not isinstance(actions, torch.Tensor):
        raise ValueError(f"actions must be a torch.Tensor, got {type(actions).__name__}")
    if tuple(actions.shape) != (num_envs, num_actions):
        raise ValueError(f"actions must have shape ({num_envs}, {num_actions}), got {tuple(actions.shape)}")
    if not actions.is_floating_point():
        raise ValueError(f"actions must be a floating-point tensor, got dtype {actions.dtype}")
    if not on_device(actions, device):
        raise ValueError(f"actions must be on the env's device {device}, got {actions.device}")
    actions = actions.detach()
    if not finite:
        return actions
    bad = ~torch.isfinite(actions).all(-1)
    if bad.any():
        raise ValueError(f"actions have NaN or inf for env ids {torch.nonzero(bad).flatten().tolist()}")
    return actions
