"""Isaac Lab envs (``DirectRLEnv``, ``ManagerBasedRLEnv``; raw or gym-wrapped) as a :class:`ppo_bootstrap.env.VecEnv`.

Isaac Lab resets ended envs inside ``step()`` (same-step auto-reset), so the observation it returns
for them already belongs to the next episode. The true last observation has to be captured before
that reset, in one of two ways:

* ``final_obs="extras"`` (Isaac Lab 3.x): the env computes the observation once more before the
  reset and stores it in ``extras["final_obs"]`` when ``cfg.compute_final_obs`` is True. The flag
  must be set on the cfg before the env is built (see :func:`enable_final_obs`); the adapter raises
  if it is off. ``extras["final_obs"]`` holds all ``N`` rows, is written only on steps where some
  env resets and is never cleared, so the adapter reads it only through the done mask and raises
  when a step with ended envs did not replace it (a stale value from an earlier step).
* ``final_obs="hook"`` (Isaac Lab 2.x, which has no ``compute_final_obs``; works on 3.x too): the
  adapter wraps the env instance's ``_reset_idx`` so that, during ``step()``, the observations are
  computed (``observation_manager.compute()``, or ``_get_observations()`` plus the observation
  noise model for direct envs) and the rows of the resetting env ids are kept, before the original
  ``_reset_idx`` runs. This is exactly the point where 3.x computes ``extras["final_obs"]``.

``"auto"`` (default) picks ``"extras"`` when the cfg has ``compute_final_obs`` and ``"hook"`` otherwise.

Everything else (action checks and clipping, group selection, the flags, ``final_env_ids``,
``info["log"]``) is the shared :class:`~isaac_adapter.adapters.base.IsaacApiVecEnv`; this class adds
the two capture routes above. Episode ends: Isaac Lab's termination terms with ``time_out=True``
land in ``truncated``, the others in ``terminated``; both may be true and both are passed on. For
a finite-horizon task (``cfg.is_finite_horizon``, the flag Isaac Lab's RL wrappers read) a
time-out is terminal (:func:`ppo_bootstrap.episode.time_limit_as_terminal`).

An env that recomputes ``extras["final_obs"]`` for every env on every step and says so
(``final_obs_every_step``, as :class:`~isaac_adapter.isaaclab.g1_direct.G1WalkDirectEnv` does when it
resets by mask) is read in the dense form: ``final_obs_all`` ``[N, ...]``, checked for freshness
on every step, and no ids.

Host synchronisation: in the dense form none. Otherwise the adapter adds exactly one per step, the
``nonzero`` that produces ``final_env_ids`` (Isaac Lab's own step already performs the same
``nonzero`` on ``reset_buf``).
Everything else stays on the device. In hook mode, the check that every ended env was captured
(``check_final_obs``) costs a second sync and is therefore on by default only on CPU.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import torch

from ppo_bootstrap.env import ObsGroups
from ppo_bootstrap.episode import EpisodeProtocolError

from isaac_adapter.adapters._common import shares_memory
from isaac_adapter.adapters.base import IsaacApiVecEnv, StepOutput

_HOOK_MARK = "_ppo_bootstrap_final_obs_hook"


def enable_final_obs(env_cfg: Any) -> Any:
    """Set ``env_cfg.compute_final_obs = True`` (Isaac Lab 3.x) before the env is built; returns the cfg.

    Raises:
        ValueError: the cfg has no ``compute_final_obs`` (Isaac Lab 2.x): use ``final_obs="hook"``.
    """
    if not hasattr(env_cfg, "compute_final_obs"):
        raise ValueError(
            f"{type(env_cfg).__name__} has no compute_final_obs (Isaac Lab < 3.0); "
            "build the env as it is and adapt it with IsaacLabVecEnv(env, final_obs='hook')"
        )
    env_cfg.compute_final_obs = True
    return env_cfg


def _is_gym_wrapper(env: Any) -> bool:
    try:
        import gymnasium
    except ImportError:  # pragma: no cover - Isaac Lab always ships gymnasium
        return False
    return isinstance(env, gymnasium.Wrapper)


def _num_actions(base: Any) -> int:
    manager = getattr(base, "action_manager", None)
    if manager is not None:
        return int(manager.total_action_dim)
    space = getattr(base, "single_action_space", None)
    if space is not None and getattr(space, "shape", None) is not None:
        n = 1
        for d in space.shape:
            n *= int(d)
        return n
    action_space = getattr(base.cfg, "action_space", None)
    if isinstance(action_space, int):
        return action_space
    raise ValueError(f"cannot tell the action size of {type(base).__name__}")


def _fingerprint(final_obs: Mapping[str, Any]) -> tuple:
    """Identity of ``extras["final_obs"]``: the dict, its tensors and their in-place version counters."""
    parts: list[Any] = [id(final_obs)]
    for key in sorted(final_obs):
        value = final_obs[key]
        try:
            version = value._version if isinstance(value, torch.Tensor) else None
        except RuntimeError:  # inference tensors carry no version counter; identity still tells
            version = None
        parts.append((key, id(value), version))
    return tuple(parts)


class IsaacLabVecEnv(IsaacApiVecEnv):
    """Adapts an Isaac Lab RL env to :class:`ppo_bootstrap.env.VecEnv`.

    Args:
        env: a ``DirectRLEnv`` / ``ManagerBasedRLEnv``, or anything whose ``.unwrapped`` is one
            (``gym.make`` result, ``RslRlVecEnvWrapper``, ...). Gymnasium wrappers around it are
            stepped (so they keep working); other wrappers are bypassed.
        obs_groups: ``{"policy": env_group, "critic": env_group}``; default: ``"policy"`` and,
            when present, ``"critic"``. Other groups are dropped.
        final_obs: ``"auto"``, ``"extras"`` (Isaac Lab 3 ``compute_final_obs``, or the dense form of an
            env with ``final_obs_every_step``) or ``"hook"``.
        clip_actions: clamp actions to ``[-clip, clip]`` before stepping (like Isaac Lab's RL wrappers).
        check_final_obs: hook mode only: verify that every ended env was captured before its reset
            (one extra host sync). Default: on for CPU envs, off for GPU envs.
    """

    _env_kind = "an Isaac Lab RL env"
    _required_attrs = (*IsaacApiVecEnv._required_attrs, "_reset_idx")

    def __init__(
        self,
        env: Any,
        obs_groups: Mapping[str, str] | None = None,
        final_obs: str = "auto",
        clip_actions: float | None = None,
        check_final_obs: bool | None = None,
    ) -> None:
        super().__init__(env, obs_groups, clip_actions)
        if _is_gym_wrapper(env):
            self._stepper = env  # step through gymnasium wrappers so they keep working
        self.final_obs_mode = self._final_obs_mode(final_obs)
        self._last_final_obs: Any = None  # kept alive so its id cannot be reused
        self._last_fingerprint: tuple | None = None
        self._steps = 0

        # hook-mode capture state
        self.check_final_obs = self.device.type == "cpu" if check_final_obs is None else check_final_obs
        self._capturing = False
        self._hook_calls = 0
        self._captured: ObsGroups | None = None
        self._captured_mask: torch.Tensor | None = None
        if self.final_obs_mode == "hook":
            self._install_hook()

    def _read_num_actions(self, base: Any) -> int:
        return _num_actions(base)  # direct envs have no action manager

    def _final_obs_mode(self, final_obs: str) -> str:
        """``"extras"`` or ``"hook"`` for the requested mode; raises when the cfg cannot serve it."""
        has_flag = hasattr(self.cfg, "compute_final_obs")
        if final_obs in ("auto", "extras") and getattr(self.unwrapped, "final_obs_every_step", False):
            return "dense"
        if final_obs == "auto":
            final_obs = "extras" if has_flag else "hook"
        if final_obs == "hook":
            return final_obs
        if final_obs != "extras":
            raise ValueError(f"final_obs must be 'auto', 'extras' or 'hook', got {final_obs!r}")
        if not has_flag:
            raise ValueError(f"{type(self.cfg).__name__} has no compute_final_obs (Isaac Lab < 3.0): use final_obs='hook'")
        if not self.cfg.compute_final_obs:
            raise ValueError(
                "the env was built with cfg.compute_final_obs=False, so it cannot report the observation "
                "of an env before its same-step reset and timeouts cannot be bootstrapped. Set "
                "env_cfg.compute_final_obs = True (isaac_adapter.adapters.isaaclab.enable_final_obs) before "
                "gym.make / the env constructor, or adapt with final_obs='hook'"
            )
        return final_obs

    # ------------------------------------------------------------------ hook mode
    def _install_hook(self) -> None:
        base = self.unwrapped
        original = base._reset_idx
        if getattr(original, _HOOK_MARK, False):
            raise ValueError("this env is already adapted with final_obs='hook'; adapt it once")

        def _reset_idx(env_ids, *args, **kwargs):
            if self._capturing:
                self._capture(env_ids)
            return original(env_ids, *args, **kwargs)

        setattr(_reset_idx, _HOOK_MARK, True)
        base._reset_idx = _reset_idx  # instance attribute: found before the class method by self._reset_idx

    def _compute_obs(self) -> Mapping[str, Any]:
        """The env's observations of the current state, computed the way its step computes them."""
        base = self.unwrapped
        manager = getattr(base, "observation_manager", None)
        if manager is not None:
            if "update_history" in inspect.signature(manager.compute).parameters:
                return manager.compute(update_history=False)  # do not push history for a terminal read
            return manager.compute()
        if hasattr(base, "_compute_observations"):  # Isaac Lab 3 direct env: observations + noise
            return base._compute_observations()
        obs = dict(base._get_observations())
        noise = getattr(base, "_observation_noise_model", None) if getattr(base.cfg, "observation_noise_model", None) else None
        if noise is not None and "policy" in obs:
            obs["policy"] = noise.apply(obs["policy"]) if hasattr(noise, "apply") else noise(obs["policy"])
        return obs

    def _capture(self, env_ids: Any) -> None:
        obs = self._select(self._compute_obs(), "pre-reset observations")
        if isinstance(env_ids, slice) or env_ids is None:
            ids = torch.arange(self.num_envs, device=self.device)[env_ids if env_ids is not None else slice(None)]
        else:
            ids = torch.as_tensor(env_ids, device=self.device).long().reshape(-1)
        if self._captured is None or any(
            self._captured[g].shape[1:] != v.shape[1:] or self._captured[g].dtype != v.dtype for g, v in obs.items()
        ):
            self._captured = {g: torch.zeros_like(v) for g, v in obs.items()}
            self._captured_mask = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        for group, value in obs.items():
            self._captured[group][ids] = value[ids]
        self._captured_mask[ids] = True
        self._hook_calls += 1

    def _final_from_hook(self, ids: torch.Tensor) -> ObsGroups:
        if self._hook_calls == 0 or self._captured is None:
            raise EpisodeProtocolError(
                f"env ids {ids.tolist()} ended but the env did not call _reset_idx during step(), so no final "
                "observation was captured (a custom reset path?)"
            )
        if self.check_final_obs:
            missing = ids[~self._captured_mask[ids]]
            if missing.numel():
                raise EpisodeProtocolError(
                    f"final_obs missing for env ids {missing.tolist()}: they ended but were not reset through "
                    "_reset_idx during step()"
                )
        return {g: v[ids] for g, v in self._captured.items()}

    # ------------------------------------------------------------------ extras mode
    def _final_from_extras(self, extras: Any, ids: torch.Tensor, obs: ObsGroups) -> ObsGroups:
        rows = self._fresh_final_obs(extras, obs, lambda: f"env ids {ids.tolist()} ended")
        return {group: value[ids.to(value.device)].to(self.device) for group, value in rows.items()}

    def _fresh_final_obs(self, extras: Any, obs: ObsGroups, ended: Any) -> ObsGroups:
        """``extras["final_obs"]``'s groups ``{group: [N, ...]}``, checked: present, recomputed this step
        (not the same unmodified object as on an earlier step), ``N`` rows, no memory shared with the
        post-reset ``obs``. ``ended()`` words the envs that ended, for the error lines only."""
        final = extras.get("final_obs") if isinstance(extras, Mapping) else None
        if final is None:
            raise EpisodeProtocolError(
                f"{ended()} but extras has no 'final_obs': the env cannot provide the "
                "observation before its reset (cfg.compute_final_obs must be True before the env is built)"
            )
        if not isinstance(final, Mapping):
            raise EpisodeProtocolError(f"extras['final_obs'] must be a dict of observation groups, got {type(final).__name__}")
        fingerprint = _fingerprint(final)
        if fingerprint == self._last_fingerprint:
            raise EpisodeProtocolError(
                f"stale final observation: {ended()} at step {self._steps} but "
                "extras['final_obs'] is the same, unmodified object as on an earlier step (the env reset them "
                "without recomputing it)"
            )
        self._last_final_obs, self._last_fingerprint = final, fingerprint
        rows = self._select(final, "extras['final_obs']")
        for group, value in rows.items():
            if value.shape[0] != self.num_envs:
                raise EpisodeProtocolError(
                    f"extras['final_obs'][{self._mapping[group]!r}] has {value.shape[0]} rows for {self.num_envs} envs"
                )
            if shares_memory(value, obs[group]):
                raise EpisodeProtocolError(
                    f"extras['final_obs'][{self._mapping[group]!r}] shares memory with the post-reset observation; "
                    f"the final observation of {ended()} was overwritten by the reset"
                )
        return {group: value.to(self.device) for group, value in rows.items()}

    def _final_obs_all(self, obs: ObsGroups, extras: Any) -> ObsGroups | None:
        # an env that recomputes extras["final_obs"] for every env on every step (a reset by mask)
        # hands them on whole: no nonzero, no host sync
        if self.final_obs_mode != "dense":
            return None
        return self._fresh_final_obs(extras, obs, lambda: "the envs with terminated | truncated")

    # ------------------------------------------------------------------ IsaacApiVecEnv
    def _env_step(self, actions: torch.Tensor) -> StepOutput:
        if self.final_obs_mode == "hook":
            self._arm_capture()
        try:
            out = super()._env_step(actions)
        finally:
            self._capturing = False  # a reset outside step() (the user's reset()) is no episode end
        self._steps += 1
        return out

    def _arm_capture(self) -> None:
        """Start a step in hook mode: nothing captured yet, and the hook records the resets from now on."""
        self._hook_calls = 0
        if self._captured_mask is not None:
            self._captured_mask.zero_()
        self._capturing = True

    def _end_episodes(self, obs: ObsGroups, extras: Any, ids: torch.Tensor) -> tuple[ObsGroups, ObsGroups, Any]:
        # the env already reset the ended envs inside step(): obs is post-reset, the final rows were kept aside
        if self.final_obs_mode == "extras":
            final = self._final_from_extras(extras, ids, obs)
        else:
            final = self._final_from_hook(ids)
        return obs, final, extras
