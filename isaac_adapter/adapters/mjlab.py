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

A hook around ``_reset_idx`` (the Isaac Lab 2.x route) would be wrong here: mjlab refreshes derived
kinematics once per step *after* its auto-reset, so observations computed just before the reset
would be one physics substep stale. ``auto_reset=False`` is the supported route.

The episode statistics mjlab writes while resetting (``extras["log"]``) come back as ``info["log"]``.
For a finite-horizon task (``cfg.is_finite_horizon``) a time-out is terminal: ``terminated |= truncated``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from ppo_bootstrap.env import ObsGroups, StepResult, check_actions
from ppo_bootstrap.episode import EpisodeProtocolError, done_mask

from isaac_adapter.adapters._common import (
    empty_rows,
    finite_horizon_flags,
    log_scalars,
    resolve_groups,
    select_groups,
    unwrap,
)


def disable_auto_reset(env_cfg: Any) -> Any:
    """Set ``env_cfg.auto_reset = False`` before the env is built; returns the cfg."""
    if not hasattr(env_cfg, "auto_reset"):
        raise ValueError(f"{type(env_cfg).__name__} has no auto_reset (mjlab < 1.6?); the adapter needs it")
    env_cfg.auto_reset = False
    return env_cfg


class MjlabVecEnv:
    """Adapts an mjlab ``ManagerBasedRlEnv`` built with ``cfg.auto_reset=False``.

    Args:
        env: the env, or a wrapper whose ``.unwrapped`` is it (e.g. mjlab's ``RslRlVecEnvWrapper``).
        obs_groups: ``{"policy": env_group, "critic": env_group}``; default: ``"policy"`` or
            ``"actor"``, and ``"critic"`` when present. Other groups are dropped.
        clip_actions: clamp actions to ``[-clip, clip]`` before stepping.
    """

    def __init__(self, env: Any, obs_groups: Mapping[str, str] | None = None, clip_actions: float | None = None) -> None:
        self.env = env
        self.unwrapped = base = unwrap(env)
        for attr in ("cfg", "num_envs", "device", "step", "reset"):
            if not hasattr(base, attr):
                raise TypeError(f"{type(base).__name__} is not an mjlab RL env (no {attr!r})")
        self.cfg = base.cfg
        if getattr(self.cfg, "auto_reset", True):
            raise ValueError(
                "the mjlab env was built with cfg.auto_reset=True: its step() resets ended envs before the "
                "observation is computed, so the final observation is lost. Set env_cfg.auto_reset = False "
                "(isaac_adapter.adapters.mjlab.disable_auto_reset) before building the env"
            )
        self.num_envs = int(base.num_envs)
        self.device = torch.device(base.device)
        self.num_actions = int(base.action_manager.total_action_dim)
        self.finite_horizon = bool(getattr(self.cfg, "is_finite_horizon", False))
        self.clip_actions = clip_actions
        self._obs_groups = obs_groups
        self._mapping: dict[str, str] | None = None

    def _groups_for(self, obs: Mapping[str, Any]) -> dict[str, str]:
        if self._mapping is None:
            self._mapping = resolve_groups(obs, self._obs_groups)
        return self._mapping

    def reset(self) -> ObsGroups:
        obs, _ = self.unwrapped.reset()
        return {k: v.clone() for k, v in select_groups(obs, self._groups_for(obs), "reset() obs").items()}

    def step(self, actions: torch.Tensor) -> StepResult:
        check_actions(actions, self.num_envs, self.num_actions, self.device)
        if self.clip_actions is not None:
            actions = actions.clamp(-self.clip_actions, self.clip_actions)
        obs_raw, reward, terminated, truncated, extras = self.unwrapped.step(actions.to(self.device))
        obs = select_groups(obs_raw, self._groups_for(obs_raw), "step() obs")
        reward = reward.reshape(self.num_envs).clone()
        terminated, truncated = finite_horizon_flags(terminated, truncated, self.finite_horizon)
        ids = torch.nonzero(done_mask(terminated, truncated)).flatten()  # the one host sync of the adapter
        if ids.numel() == 0:
            info: dict[str, Any] = {"extras": extras}
            return StepResult(obs, reward, terminated, truncated, empty_rows(obs), ids, info)

        final = {g: v[ids] for g, v in obs.items()}  # advanced indexing copies: safe from the reset below
        reset_obs_raw, reset_extras = self.unwrapped.reset(env_ids=ids)
        reset_obs = select_groups(reset_obs_raw, self._mapping, "reset(env_ids) obs")
        post = {}
        for group, value in obs.items():
            fresh = reset_obs[group]
            if fresh.shape != value.shape:
                raise EpisodeProtocolError(
                    f"reset(env_ids={ids.tolist()}) returned obs[{group!r}] of shape {tuple(fresh.shape)}, "
                    f"step() returned {tuple(value.shape)}"
                )
            post[group] = value.index_copy(0, ids, fresh[ids])
        info = {"extras": reset_extras, "log": log_scalars(reset_extras.get("log") if isinstance(reset_extras, Mapping) else None)}
        return StepResult(post, reward, terminated, truncated, final, ids, info)

    def close(self) -> None:
        close = getattr(self.env, "close", None)
        if close is not None:
            close()
