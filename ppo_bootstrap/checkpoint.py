"""Checkpoint files: one place that writes them, reads them and rebuilds the policy they hold.

A checkpoint is a ``torch.save`` dict. A full one (``Runner.save``) holds ``iteration``,
``total_steps``, ``world_size``, ``policy`` (the :class:`ActorCritic` state dict), ``ppo``
(optimizer and learning rate), ``config`` (the ``RunnerConfig`` as a dict), the observations,
recurrent states, episode accumulators, env state and RNG states. A policy-only file (what
``docs/checkpoints`` ships) holds ``policy`` and ``config`` alone.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from ppo_bootstrap.env import ObsGroups, POLICY, critic_obs
from ppo_bootstrap.modules.actor_critic import ActorCritic, PolicyConfig


def save_atomic(state: dict[str, Any], path: str | os.PathLike) -> Path:
    """Write ``state`` to ``path`` through a temporary file, fsync and rename: a crash mid-save leaves
    the previous file at ``path`` intact. Returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def read(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """The dict stored at ``path``, tensors mapped to ``map_location``."""
    return torch.load(path, map_location=map_location, weights_only=False)


def policy_config(ckpt: dict[str, Any]) -> PolicyConfig:
    """The network shape a checkpoint was trained with."""
    return PolicyConfig(**ckpt["config"]["policy"])


def load_policy(
    path: str | os.PathLike, obs: ObsGroups, num_actions: int, device: str | torch.device = "cpu"
) -> ActorCritic:
    """The actor-critic of a checkpoint, normalizers included, sized for envs that return ``obs``.

    Only the network is restored (no optimizer, env or RNG state), so it suits evaluation, playback
    and export on an env of any size.

    Raises:
        ValueError: the checkpoint's network does not fit ``obs`` / ``num_actions``.
    """
    ckpt = read(path, device)
    policy_dim, critic_dim = obs[POLICY].shape[-1], critic_obs(obs).shape[-1]
    policy = ActorCritic(policy_dim, critic_dim, num_actions, policy_config(ckpt)).to(device)
    try:
        policy.load_state_dict(ckpt["policy"])
    except RuntimeError as err:
        raise ValueError(
            f"checkpoint {path} does not fit this env (policy input {policy_dim}, critic input "
            f"{critic_dim}, {num_actions} actions): it was trained with another task configuration\n{err}"
        ) from err
    return policy.eval()
