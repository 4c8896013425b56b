"""mjlab envs (``ManagerBasedRlEnv``, Isaac Lab's API on MuJoCo Warp) as a :class:`ppo_bootstrap.env.VecEnv`.

mjlab's default same-step auto-reset returns post-reset observations for ended envs and has no
``compute_final_obs``. Built with ``cfg.auto_reset = False`` it instead returns the *true terminal
observation* of every env and refuses to step again until the ended envs are reset with
``reset(env_ids=...)``. The adapter uses that mode:

1. ``env.step(actions)``: rewards, ``terminated`` (fall terms), ``truncated`` (``time_out=True``
   terms) and the observations of all envs, terminal ones included;
2. ``final_env_ids = nonzero(terminated | truncated)`` (the one host sync the adapter adds; mjlab's
   own step performs the same ``nonzero``) and ``final_obs`` = those rows, copied;
3. ``env.reset(env_ids=final_env_ids)`` resets only those envs (events, commands and observation
   history of the others are untouched), and the post-reset rows of the returned observations
   replace the terminal rows. Rows of the other envs stay exactly as ``step`` returned them.

Steps 1 and 2, the flags and ``info["log"]`` are the shared
:class:`~isaac_adapter.adapters.base.IsaacApiVecEnv`; this class adds step 3.

A hook around ``_reset_idx`` (the Isaac Lab 2.x route) would be wrong here: mjlab refreshes derived
kinematics once per step *after* its auto-reset, so observations computed just before the reset
would be one physics substep stale. ``auto_reset=False`` is the supported route.

The episode statistics mjlab writes while resetting (``extras["log"]`` of ``reset(env_ids)``) come
back as ``info["log"]``. For a finite-horizon task (``cfg.is_finite_horizon``) a time-out is
terminal (:func:`ppo_bootstrap.episode.time_limit_as_terminal`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from ppo_bootstrap.env import ObsGroups
from ppo_bootstrap.episode import EpisodeProtocolError

from isaac_adapter.adapters.base import IsaacApiVecEnv


def disable_auto_reset(env_cfg: Any) -> Any:
    """Set ``env_cfg.auto_reset = False`` before the env is built; returns the cfg."""
    if not hasattr(env_cfg, "auto_reset"):
        raise ValueError(f"{type(env_cfg).__name__} has no auto_reset (mjlab < 1.6?); the adapter needs it")
    env_cfg.auto_reset = False
    return env_cfg


class MjlabVecEnv(IsaacApiVecEnv):
    """Adapts an mjlab ``ManagerBasedRlEnv`` built with ``cfg.auto_reset=False``.

    Args:
        env: the env, or a wrapper whose ``.unwrapped`` is it (e.g. mjlab's ``RslRlVecEnvWrapper``).
        obs_groups: ``{"policy": env_group, "critic": env_group}``; default: ``"policy"`` or
            ``"actor"``, and ``"critic"`` when present. Other groups are dropped.
        clip_actions: clamp actions to ``[-clip, clip]`` before stepping.
    """

    _env_kind = "an mjlab RL env"

    def __init__(self, env: Any, obs_groups: Mapping[str, str] | None = None, clip_actions: float | None = None) -> None:
        super().__init__(env, obs_groups, clip_actions)
        if getattr(self.cfg, "auto_reset", True):
            raise ValueError(
                "the mjlab env was built with cfg.auto_reset=True: its step() resets ended envs before the "
                "observation is computed, so the final observation is lost. Set env_cfg.auto_reset = False "
                "(isaac_adapter.adapters.mjlab.disable_auto_reset) before building the env"
            )

    def reset(self) -> ObsGroups:
        return {k: v.clone() for k, v in super().reset().items()}  # not the env's buffers, which its steps rewrite

    def _end_episodes(self, obs: ObsGroups, extras: Any, ids: torch.Tensor) -> tuple[ObsGroups, ObsGroups, Any]:
        # obs holds the true terminal rows; reset only the ended envs and splice in their fresh rows
        final = {g: v[ids] for g, v in obs.items()}  # advanced indexing copies: safe from the reset below
        reset_obs_raw, reset_extras = self.unwrapped.reset(env_ids=ids)
        reset_obs = self._select(reset_obs_raw, "reset(env_ids) obs")
        post = {}
        for group, value in obs.items():
            fresh = reset_obs[group]
            if fresh.shape != value.shape:
                raise EpisodeProtocolError(
                    f"reset(env_ids={ids.tolist()}) returned obs[{group!r}] of shape {tuple(fresh.shape)}, "
                    f"step() returned {tuple(value.shape)}"
                )
            post[group] = value.index_copy(0, ids, fresh[ids])
        return post, final, reset_extras
