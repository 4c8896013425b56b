"""Gymnasium (1.x) vector envs as a :class:`ppo_bootstrap.env.VecEnv`.

Gymnasium vector envs declare how they auto-reset in ``metadata["autoreset_mode"]``
(:class:`gymnasium.vector.AutoresetMode`):

* ``SAME_STEP``: an env that ends is reset inside the same ``step``; its returned observation is
  the reset one and the true last observation is in ``infos["final_obs"]`` (an object array with
  ``None`` for envs that did not end; mask ``infos["_final_obs"]``). Gymnasium 0.29's names
  ``final_observation`` / ``_final_observation`` are accepted too.
* ``NEXT_STEP`` (the default of ``SyncVectorEnv`` / ``AsyncVectorEnv``): the step that ends an
  episode returns the true last observation, and the *next* ``step`` call ignores the action of
  that env, resets it and returns a filler row (reward 0, neither flag set). That filler is not a
  transition and must never reach the rollout storage. The adapter therefore resets ended envs
  itself, right after the step that ended them, with ``reset(options={"reset_mask": done})``
  (Gymnasium >= 1.1); this clears the env's pending auto-reset, so the filler step never happens,
  and the returned rows are the post-reset observations the protocol wants. Should an env still
  have a pending auto-reset after that (a vector env that ignores ``reset_mask``), the adapter
  raises rather than let a filler row through.
* ``DISABLED``: handled exactly like ``NEXT_STEP`` (the caller must reset ended envs; the adapter does).

Observations: a ``Box`` observation space becomes the ``"policy"`` group; a ``Dict`` space maps its
keys (``obs_groups``, default ``"policy"``/``"actor"`` and ``"critic"``). Arrays are copied into
``float32`` tensors on ``device``. Actions must be a ``Box`` (the Runner's Gaussian policy); they are
sent to the env as NumPy arrays.

This adapter does not build on :class:`~isaac_adapter.adapters.base.IsaacApiVecEnv`: a Gymnasium
vector env speaks NumPy, has no ``cfg`` (so no finite horizon and no action clipping) and no
``extras["log"]``; it shares only the helpers of :mod:`isaac_adapter.adapters._common` and the
episode rules of :mod:`ppo_bootstrap.episode`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from ppo_bootstrap.env import POLICY, ObsGroups, StepResult, check_actions
from ppo_bootstrap.episode import EpisodeProtocolError, done_mask

from isaac_adapter.adapters._common import empty_rows, resolve_groups

SAME_STEP, NEXT_STEP, DISABLED = "SameStep", "NextStep", "Disabled"
_FINAL_OBS_KEYS = (("final_obs", "_final_obs"), ("final_observation", "_final_observation"))


def _mode_name(mode: Any) -> str:
    value = getattr(mode, "value", mode)
    aliases = {"samestep": SAME_STEP, "same_step": SAME_STEP, "nextstep": NEXT_STEP, "next_step": NEXT_STEP,
               "disabled": DISABLED}
    name = aliases.get(str(value).lower().replace(" ", ""))
    if name is None:
        raise ValueError(f"unknown autoreset mode {mode!r}; expected SameStep, NextStep or Disabled")
    return name


class GymnasiumVecEnv:
    """Adapts a Gymnasium ``VectorEnv`` (``SyncVectorEnv``, ``AsyncVectorEnv``, wrapped or not).

    Args:
        env: the vector env.
        obs_groups: for ``Dict`` observation spaces, ``{"policy": key, "critic": key}``.
        device: where the tensors of the protocol live.
        autoreset_mode: override ``env.metadata["autoreset_mode"]`` (needed when the env does not
            declare it, as Gymnasium 1.0 envs do not).
    """

    def __init__(
        self,
        env: Any,
        obs_groups: Mapping[str, str] | None = None,
        device: str | torch.device = "cpu",
        autoreset_mode: Any = None,
    ) -> None:
        self.env = env
        self.device = torch.device(device)
        self.num_envs = int(env.num_envs)
        mode = autoreset_mode if autoreset_mode is not None else getattr(env, "metadata", {}).get("autoreset_mode")
        if mode is None:
            raise ValueError(
                "the vector env does not declare metadata['autoreset_mode']; pass autoreset_mode= "
                "(gymnasium.vector.AutoresetMode.NEXT_STEP for Gymnasium 1.0 vector envs)"
            )
        self.autoreset_mode = _mode_name(mode)
        space = env.single_action_space
        shape = getattr(space, "shape", None)
        dtype = getattr(space, "dtype", None)
        if shape is None or len(shape) != 1 or dtype is None or not np.issubdtype(dtype, np.floating):
            raise ValueError(f"the action space must be a 1-D float Box for the Gaussian policy, got {space}")
        self.num_actions = int(shape[0])
        self._obs_groups = obs_groups
        self._mapping: dict[str, str] | None = None
        self._dict_obs: bool | None = None

    # ------------------------------------------------------------------ conversions
    def _tensor(self, value: Any) -> torch.Tensor:
        if isinstance(value, torch.Tensor):
            t = value.detach().clone()
        else:
            t = torch.from_numpy(np.array(value, copy=True))  # the env may reuse its buffers
        if not t.is_floating_point():
            t = t.to(torch.float32)
        return t.to(self.device, torch.float32)

    def _groups(self, obs: Any) -> ObsGroups:
        if self._dict_obs is None:
            self._dict_obs = isinstance(obs, Mapping)
            if self._dict_obs:
                self._mapping = resolve_groups(obs, self._obs_groups)
        if not self._dict_obs:
            return {POLICY: self._tensor(obs)}
        return {group: self._tensor(obs[name]) for group, name in self._mapping.items()}

    def _single_rows(self, items: list[Any]) -> ObsGroups:
        """Stack single-env observations (array or dict) into groups ``[K, ...]``."""
        if not self._dict_obs:
            return {POLICY: self._tensor(np.stack([np.asarray(x) for x in items]))}
        return {g: self._tensor(np.stack([np.asarray(x[name]) for x in items])) for g, name in self._mapping.items()}

    # ------------------------------------------------------------------ VecEnv
    def reset(self) -> ObsGroups:
        obs, _ = self.env.reset()
        return self._groups(obs)

    def _pending_autoreset(self) -> np.ndarray | None:
        base = getattr(self.env, "unwrapped", self.env)
        pending = getattr(base, "_autoreset_envs", None)
        return None if pending is None else np.asarray(pending, dtype=bool)

    def step(self, actions: torch.Tensor) -> StepResult:
        actions = check_actions(actions, self.num_envs, self.num_actions, self.device)
        if self.autoreset_mode != SAME_STEP:
            pending = self._pending_autoreset()
            if pending is not None and pending.any():
                raise EpisodeProtocolError(
                    f"env ids {np.flatnonzero(pending).tolist()} have a pending auto-reset: this step would "
                    "return a filler row for them, not a transition"
                )
        obs, reward, terminated, truncated, infos = self.env.step(actions.cpu().numpy())
        terminated = torch.as_tensor(np.asarray(terminated, dtype=bool), device=self.device)
        truncated = torch.as_tensor(np.asarray(truncated, dtype=bool), device=self.device)
        reward_t = torch.as_tensor(np.asarray(reward, dtype=np.float32), device=self.device).reshape(self.num_envs)
        done = done_mask(terminated, truncated)
        ids = torch.nonzero(done).flatten()
        post = self._groups(obs)
        info: dict[str, Any] = {"infos": infos}
        if ids.numel() == 0:
            return StepResult(post, reward_t, terminated, truncated, empty_rows(post), ids, info)
        id_list = ids.tolist()

        if self.autoreset_mode == SAME_STEP:
            final = self._same_step_final(infos, id_list, done)
        else:
            final = {g: v[ids] for g, v in post.items()}  # the true last observation (copied)
            done_np = done.cpu().numpy()
            reset_obs, reset_infos = self.env.reset(options={"reset_mask": done_np})
            fresh = self._groups(reset_obs)
            post = {g: v.index_copy(0, ids, fresh[g][ids]) for g, v in post.items()}
            info["reset_infos"] = reset_infos
            pending = self._pending_autoreset()
            if pending is not None and (pending & done_np).any():
                raise EpisodeProtocolError(
                    f"env ids {np.flatnonzero(pending & done_np).tolist()} still have a pending auto-reset after "
                    "reset(options={'reset_mask': ...}); the vector env would return a filler row next step"
                )
        return StepResult(post, reward_t, terminated, truncated, final, ids, info)

    def _same_step_final(self, infos: Mapping[str, Any], id_list: list[int], done: torch.Tensor) -> ObsGroups:
        for key, mask_key in _FINAL_OBS_KEYS:
            if key in infos:
                values = infos[key]
                mask = infos.get(mask_key)
                break
        else:
            raise EpisodeProtocolError(
                f"env ids {id_list} ended but infos has no 'final_obs' (SAME_STEP autoreset): the env cannot "
                "provide their final observation"
            )
        if mask is not None:
            mask = np.asarray(mask, dtype=bool)
            missing = [i for i in id_list if not mask[i]]
            extra = sorted(set(np.flatnonzero(mask).tolist()) - set(id_list))
            if missing:
                raise EpisodeProtocolError(f"infos['{key}'] is missing for env ids {missing} that ended this step")
            if extra:
                raise EpisodeProtocolError(f"infos['{key}'] is given for env ids {extra} that did not end this step")
        items = [values[i] for i in id_list]
        missing = [i for i, x in zip(id_list, items) if x is None]
        if missing:
            raise EpisodeProtocolError(f"infos['{key}'] is None for env ids {missing} that ended this step")
        return self._single_rows(items)

    def close(self) -> None:
        self.env.close()
