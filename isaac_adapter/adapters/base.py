"""The shared base of the adapters for envs with Isaac Lab's RL env API: Isaac Lab itself and mjlab.

Both simulators step the same way, ``step(actions) -> (obs, reward, terminated, truncated, extras)``,
with observation groups ``{name: [N, ...]}`` as torch tensors on the env's device, a ``cfg`` that
may set ``is_finite_horizon``, and episode statistics in ``extras["log"]``. :class:`IsaacApiVecEnv`
does everything that follows from that API; a subclass says only how the true last observation of
the ended envs is obtained (:meth:`IsaacApiVecEnv._end_episodes`) and, where needed, wraps the
simulator's step (:meth:`IsaacApiVecEnv._env_step`).

One :meth:`~IsaacApiVecEnv.step`:

1. prologue: :func:`ppo_bootstrap.env.check_actions`, the optional clamp to ``[-clip, clip]``, the
   move to the env's device;
2. the simulator's step;
3. epilogue: the protocol's groups selected, ``reward`` ``[N]`` copied, the flags passed through
   :func:`ppo_bootstrap.episode.time_limit_as_terminal`, ``final_env_ids`` ``[K]`` =
   ``nonzero(done_mask(terminated, truncated))`` (the one host sync the adapter adds); with
   ``K = 0`` the final rows are empty ``[0, ...]``, otherwise the subclass ends the episodes and
   the scalar entries of ``extras["log"]`` come back as ``info["log"]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import torch

from ppo_bootstrap.env import ObsGroups, StepResult, check_actions
from ppo_bootstrap.episode import done_mask, time_limit_as_terminal

from isaac_adapter.adapters._common import empty_rows, log_scalars, resolve_groups, select_groups, unwrap

StepOutput = tuple[Mapping[str, Any], torch.Tensor, torch.Tensor, torch.Tensor, Any]
"""What the simulator's ``step`` returns: ``(obs, reward [N], terminated [N], truncated [N], extras)``."""


class IsaacApiVecEnv:
    """Adapts an env with Isaac Lab's RL env API to :class:`ppo_bootstrap.env.VecEnv` (see the module docstring).

    Args:
        env: the env, or anything whose ``.unwrapped`` is it (``gym.make`` result, an RL wrapper).
        obs_groups: ``{"policy": env_group, "critic": env_group}``; default: ``"policy"`` or
            ``"actor"``, and ``"critic"`` when present. Other groups are dropped.
        clip_actions: clamp actions to ``[-clip, clip]`` before stepping (like the simulators' RL wrappers).

    Attributes:
        env: ``env`` as given; ``unwrapped``: the innermost env; ``cfg``: its config.
        num_envs, num_actions, device: the :class:`~ppo_bootstrap.env.VecEnv` fields.
        finite_horizon: ``cfg.is_finite_horizon``: a time-out is terminal.
    """

    _env_kind: ClassVar[str] = "an RL env with Isaac Lab's API"
    """How errors name the env the adapter expects."""
    _required_attrs: ClassVar[tuple[str, ...]] = ("cfg", "num_envs", "device", "step", "reset")

    def __init__(self, env: Any, obs_groups: Mapping[str, str] | None = None, clip_actions: float | None = None) -> None:
        self.env = env
        self.unwrapped = base = unwrap(env)
        for attr in self._required_attrs:
            if not hasattr(base, attr):
                raise TypeError(f"{type(base).__name__} is not {self._env_kind} (no {attr!r})")
        self._stepper: Any = base  # what reset() and step() call; a subclass may keep a wrapper in the loop
        self.cfg = base.cfg
        self.num_envs = int(base.num_envs)
        self.device = torch.device(base.device)
        self.num_actions = self._read_num_actions(base)
        self.finite_horizon = bool(getattr(self.cfg, "is_finite_horizon", False))
        self.clip_actions = clip_actions
        self._obs_groups = obs_groups
        self._mapping: dict[str, str] | None = None

    def _read_num_actions(self, base: Any) -> int:
        """``A``: the total action size of the env's action manager."""
        return int(base.action_manager.total_action_dim)

    @property
    def max_episode_length(self) -> int | None:
        """The simulator's time limit in policy steps, when it declares one (the Runner warns on envs
        that run past it without ``truncated``)."""
        return getattr(self.unwrapped, "max_episode_length", None)

    # ------------------------------------------------------------------ groups
    def _groups_for(self, obs: Mapping[str, Any]) -> dict[str, str]:
        """Protocol group -> env group, resolved once from the first observation dict the env returns."""
        if self._mapping is None:
            self._mapping = resolve_groups(obs, self._obs_groups)
        return self._mapping

    def _select(self, obs: Mapping[str, Any], what: str) -> ObsGroups:
        """The protocol's groups ``{group: [N, ...]}`` of an env observation dict; ``what`` names it in errors."""
        return select_groups(obs, self._groups_for(obs), what)

    # ------------------------------------------------------------------ step pieces
    def _prepare_actions(self, actions: torch.Tensor) -> torch.Tensor:
        """``[N, A]`` actions checked, clamped when ``clip_actions`` is set, on the env's device."""
        check_actions(actions, self.num_envs, self.num_actions, self.device)
        if self.clip_actions is not None:
            actions = actions.clamp(-self.clip_actions, self.clip_actions)
        return actions.to(self.device)

    def _env_step(self, actions: torch.Tensor) -> StepOutput:
        """The simulator's step on prepared ``[N, A]`` actions."""
        return self._stepper.step(actions)

    def _end_episodes(self, obs: ObsGroups, extras: Any, ids: torch.Tensor) -> tuple[ObsGroups, ObsGroups, Any]:
        """Final observations of the envs ``ids`` ``[K]`` (ascending) that ended this step.

        Args:
            obs: ``{group: [N, ...]}`` as the simulator's step returned them.
            extras: the step's extras.
            ids: ``[K]`` long, ``K > 0``.

        Returns:
            ``(obs, final_obs, extras)``: the post-reset observations ``[N, ...]``, the true last
            observations ``[K, ...]`` (rows in the order of ``ids``), and the extras that hold the
            episode logs of the resets.
        """
        raise NotImplementedError

    def _final_obs_all(self, obs: ObsGroups, extras: Any) -> ObsGroups | None:
        """The true last observation of every env ``{group: [N, ...]}`` when the simulator gives it for
        all rows on every step (the dense form of the contract, no host sync); ``None`` otherwise,
        and the step takes the ids of the ended envs (:meth:`_end_episodes`)."""
        return None

    # ------------------------------------------------------------------ VecEnv
    def reset(self) -> ObsGroups:
        """Reset every env; ``{group: [N, ...]}``."""
        obs, _ = self._stepper.reset()
        return self._select(obs, "reset() obs")

    def step(self, actions: torch.Tensor) -> StepResult:
        obs_raw, reward, terminated, truncated, extras = self._env_step(self._prepare_actions(actions))
        obs = self._select(obs_raw, "step() obs")
        reward = reward.reshape(self.num_envs).clone()  # the env rewrites its reward buffer next step
        terminated, truncated = time_limit_as_terminal(terminated, truncated, self.finite_horizon)
        final_all = self._final_obs_all(obs, extras)
        if final_all is not None:  # the dense form: every env's row, read through the done mask downstream
            log = log_scalars(extras.get("log") if isinstance(extras, Mapping) else None)
            return StepResult(obs, reward, terminated, truncated, None, None, {"extras": extras, "log": log},
                              final_obs_all=final_all)
        ids = torch.nonzero(done_mask(terminated, truncated)).flatten()  # the one host sync of the adapter
        if ids.numel() == 0:
            return StepResult(obs, reward, terminated, truncated, empty_rows(obs), ids, {"extras": extras})
        obs, final, extras = self._end_episodes(obs, extras, ids)
        # the simulators write their episode statistics while resetting, so only steps with resets have them
        log = log_scalars(extras.get("log") if isinstance(extras, Mapping) else None)
        return StepResult(obs, reward, terminated, truncated, final, ids, {"extras": extras, "log": log})

    def close(self) -> None:
        close = getattr(self.env, "close", None)
        if close is not None:
            close()
