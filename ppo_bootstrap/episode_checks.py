"""The env step contract checked, repaired and watched: what :mod:`ppo_bootstrap.episode`'s rules
assume of a step.

* :func:`check_contract`, :func:`check_finite`, :func:`validate_step`, :func:`recover_non_finite`:
  the step contract of :mod:`ppo_bootstrap.env`, checked in that order (contract, then finiteness
  or its repair); :class:`StepChecks` runs them as the Runner configures them;
* :class:`FlagWatch`: warnings for what the flags cannot show (``info["time_outs"]`` against
  ``truncated``, a declared time limit run past).
"""

from __future__ import annotations

import dataclasses
import reprlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import torch

from ppo_bootstrap.env import StepResult, on_device
from ppo_bootstrap.episode import EpisodeProtocolError, blow_up_flags, done_mask, final_rows, sparse


def _ids(mask: torch.Tensor) -> list[int]:
    return torch.nonzero(mask.reshape(mask.shape[0], -1).any(-1)).flatten().tolist()


def _check_finite(name: str, value: torch.Tensor, row_env_ids: torch.Tensor | None = None) -> None:
    if not value.is_floating_point():
        return
    bad = ~torch.isfinite(value)
    if bad.any():
        rows = _ids(bad)
        env_ids = row_env_ids[rows].tolist() if row_env_ids is not None else rows
        raise EpisodeProtocolError(f"{name} has NaN or inf for env ids {env_ids}")


ObsLayout = Mapping[str, tuple[int, ...]]
"""Observation groups and their per-env shapes ``{group: (D, ...)}``, as ``reset()`` returned them."""


def obs_layout(obs: Mapping[str, torch.Tensor]) -> dict[str, tuple[int, ...]]:
    """The layout every step's ``obs`` and ``final_obs`` must keep: ``{group: shape[1:]}`` of ``obs``."""
    return {group: tuple(value.shape[1:]) for group, value in obs.items()}


def _check_tensor(name: str, value: object, device: torch.device | None) -> None:
    if not isinstance(value, torch.Tensor):
        raise EpisodeProtocolError(f"{name} must be a torch.Tensor, got {type(value).__name__} {reprlib.repr(value)}")
    if device is not None and not on_device(value, device):
        raise EpisodeProtocolError(f"{name} is on {value.device}, not on the env's device {device}")


def _check_groups(
    name: str, groups: object, layout: ObsLayout | None, rows: int, device: torch.device, env_ids: torch.Tensor | None
) -> ObsLayout:
    """Groups and shapes ``[rows, *layout[group]]`` of ``obs`` (``env_ids=None``: every env) or ``final_obs``.

    ``layout=None`` takes the layout from ``groups`` themselves. Returns the layout checked against.
    """

    def where() -> str:  # only on the way to an error: naming the ids costs a host sync
        return "all env ids" if env_ids is None else f"env ids {env_ids.tolist()}"

    if not isinstance(groups, Mapping):
        raise EpisodeProtocolError(f"{name} must be a dict of observation groups, got {type(groups).__name__}")
    for group, value in groups.items():
        _check_tensor(f"{name}[{group!r}]", value, device)
    layout = obs_layout(groups) if layout is None else layout
    if set(groups) != set(layout):
        raise EpisodeProtocolError(
            f"{name} groups {sorted(groups)} differ from the reset() groups {sorted(layout)} for {where()}"
        )
    for group, value in groups.items():
        expected = (rows, *layout[group])
        if tuple(value.shape) != expected:
            raise EpisodeProtocolError(
                f"{name}[{group!r}] has shape {tuple(value.shape)}, expected {expected} for {where()}"
            )
    return layout


def _check_final_env_ids(terminated: torch.Tensor, truncated: torch.Tensor, final_env_ids: torch.Tensor) -> None:
    expected = torch.nonzero(done_mask(terminated, truncated)).flatten()
    if torch.equal(final_env_ids, expected):
        return
    reported_set, expected_set = set(final_env_ids.tolist()), set(expected.tolist())
    missing = sorted(expected_set - reported_set)
    extra = sorted(reported_set - expected_set)
    if missing:
        raise EpisodeProtocolError(f"final_obs missing for env ids {missing} that ended this step")
    if extra:
        raise EpisodeProtocolError(f"final_obs given for env ids {extra} that did not end this step")
    raise EpisodeProtocolError(
        f"final_env_ids must list each ended env once, in ascending order; got {final_env_ids.tolist()}"
    )


def check_contract(
    num_envs: int,
    result: StepResult,
    layout: ObsLayout | None = None,
    device: str | torch.device | None = None,
    ids: bool = True,
) -> None:
    """Check one step's contract, finiteness aside; raise :class:`EpisodeProtocolError` naming field and env ids.

    Types, devices (``device``, default: the reward's), dtypes and shapes, and the observation
    groups with their per-env shapes against ``layout`` (what ``reset()`` returned; default: this
    step's ``obs``) need no host synchronisation. ``ids=True`` adds the check that
    ``final_env_ids`` lists exactly the envs that ended, which costs one.
    """
    reward, terminated, truncated = result.reward, result.terminated, result.truncated
    _check_tensor("reward", reward, device)
    device = reward.device if device is None else torch.device(device)
    for name, flag in (("terminated", terminated), ("truncated", truncated)):
        _check_tensor(name, flag, device)
        if flag.dtype != torch.bool:
            raise EpisodeProtocolError(f"{name} must be a bool tensor, got dtype {flag.dtype}")
        if tuple(flag.shape) != (num_envs,):
            raise EpisodeProtocolError(f"{name} must have shape ({num_envs},), got {tuple(flag.shape)}")
    if tuple(reward.shape) != (num_envs,):
        raise EpisodeProtocolError(f"reward must have shape ({num_envs},), got {tuple(reward.shape)}")
    layout = _check_groups("obs", result.obs, layout, num_envs, device, None)
    if result.final_obs_all is not None:
        # the dense form: every env's pre-reset row, so nothing to match against the done mask
        if result.final_obs is not None or result.final_env_ids is not None:
            raise EpisodeProtocolError("give final_obs_all or final_obs with final_env_ids, not both")
        _check_groups("final_obs_all", result.final_obs_all, layout, num_envs, device, None)
        return
    final_env_ids = result.final_env_ids
    _check_tensor("final_env_ids", final_env_ids, device)
    if final_env_ids.dim() != 1 or final_env_ids.dtype not in (torch.int32, torch.int64):
        raise EpisodeProtocolError(
            f"final_env_ids must be a 1-D integer tensor, got {final_env_ids.dtype} {tuple(final_env_ids.shape)}"
        )
    if ids:
        _check_final_env_ids(terminated, truncated, final_env_ids)
    _check_groups("final_obs", result.final_obs, layout, final_env_ids.shape[0], device, final_env_ids)


def check_finite(result: StepResult) -> None:
    """Raise :class:`EpisodeProtocolError` naming field and env ids where reward, obs or final obs is NaN or inf.

    Assumes :func:`check_contract` passed. Costs a host synchronisation.
    """
    _check_finite("reward", result.reward)
    for group, value in result.obs.items():
        _check_finite(f"obs[{group!r}]", value)
    final_env_ids, final_obs = final_rows(result)
    for group, value in final_obs.items():
        _check_finite(f"final_obs[{group!r}]", value, final_env_ids)


def validate_step(
    num_envs: int, result: StepResult, layout: ObsLayout | None = None, device: str | torch.device | None = None
) -> None:
    """Check one step against the env contract: :func:`check_contract` first, then :func:`check_finite`.

    Costs host synchronisations, so the Runner lets users switch it off on GPU once an env is trusted.
    """
    check_contract(num_envs, result, layout, device)
    check_finite(result)


def _bad_rows(groups: Mapping[str, torch.Tensor]) -> torch.Tensor:
    return torch.stack([~torch.isfinite(v.reshape(v.shape[0], -1)).all(-1) for v in groups.values()]).any(0)


def recover_non_finite(
    result: StepResult,
    last_obs: Mapping[str, torch.Tensor],
    reset_envs: Callable[[torch.Tensor], Mapping[str, torch.Tensor]],
) -> tuple[StepResult, torch.Tensor]:
    """End the episodes of envs whose physics blew up (non-finite obs, reward or final obs).

    A blow-up is no state of the task, so it is neither a fall nor a valid final state: the step is
    marked truncated, bootstrapped from ``V(s_t)`` (the last valid observation, ``last_obs``), its
    reward zeroed if non-finite, and the env restarted through ``reset_envs(env_ids)``, which must
    return fresh observation rows ``[K, ...]`` per group. A fall on the same step stays a fall.

    ``result`` must keep the contract (:func:`check_contract`, at least with ``ids=False``): the
    repair indexes by its shapes and ids. Fresh rows of the wrong groups or shape raise
    :class:`EpisodeProtocolError` naming the env ids.

    Returns:
        ``(result, broken_env_ids)``: the repaired :class:`~ppo_bootstrap.env.StepResult` (same
        contract; ``result`` itself is not modified) and the ``[B]`` ids that blew up.
    """
    result = sparse(result)
    obs, reward, final_obs, final_env_ids = result.obs, result.reward, result.final_obs, result.final_env_ids
    bad = _bad_rows(obs) | ~torch.isfinite(reward)
    bad_final = torch.zeros_like(bad)
    if final_env_ids.numel():
        bad_final[final_env_ids] = _bad_rows(final_obs)
    broken = torch.nonzero(bad | bad_final).flatten()
    if broken.numel() == 0:
        return result, broken

    fresh = reset_envs(broken)
    _check_groups("reset_envs() obs", fresh, obs_layout(obs), broken.numel(), reward.device, broken)
    obs = {k: v.clone() for k, v in obs.items()}
    for k in obs:
        obs[k][broken] = fresh[k].to(obs[k].dtype)
    reward, truncated = blow_up_flags(reward, result.truncated, bad | bad_final)
    # final rows: ended envs keep their own final obs unless it is broken; broken envs get s_t.
    ended = torch.nonzero(done_mask(result.terminated, truncated)).flatten()
    rows = {k: last_obs[k][ended].clone().to(v.dtype) for k, v in obs.items()}
    position = torch.full_like(bad, -1, dtype=torch.long)
    position[final_env_ids] = torch.arange(final_env_ids.numel(), device=final_env_ids.device)
    keep = (position[ended] >= 0) & ~bad_final[ended]
    for k in rows:
        rows[k][keep] = final_obs[k][position[ended][keep]]
    repaired = dataclasses.replace(
        result, obs=obs, reward=reward, truncated=truncated, final_obs=rows, final_env_ids=ended
    )
    return repaired, broken


class EpisodeProtocolWarning(UserWarning):
    """An env's flags look wrong in a way no single step proves; the message names the env ids."""


def declared_time_limit(env: Any) -> int | None:
    """The time limit in policy steps an env declares as ``max_episode_length`` (Isaac Lab's name), or ``None``."""
    limit = getattr(env, "max_episode_length", None)
    return None if limit is None else int(limit)


def time_limit_overrun(episode_length: torch.Tensor, truncated: torch.Tensor, limit: int) -> torch.Tensor:
    """``[N]`` bool: envs whose episode has run more than ``limit`` steps (``episode_length`` ``[N]``
    counts this step) and that are not truncated on this step."""
    return (episode_length > limit) & ~truncated


def time_outs_mismatch(info: Mapping[str, Any], truncated: torch.Tensor) -> torch.Tensor | None:
    """``[N]`` bool where ``info["time_outs"]`` differs from ``truncated`` ``[N]``, or ``None`` when
    ``info`` has no ``time_outs`` tensor of that shape."""
    time_outs = info.get("time_outs") if isinstance(info, Mapping) else None
    if not isinstance(time_outs, torch.Tensor) or time_outs.shape != truncated.shape:
        return None
    return time_outs.to(truncated.device, torch.bool) != truncated


def _id_text(ids: list[int], most: int = 16) -> str:
    if len(ids) <= most:
        return str(ids)
    return f"[{', '.join(map(str, ids[:most]))}, ...] ({len(ids)} envs)"


class FlagWatch:
    """Faults the flags cannot show, gathered over a rollout and warned about once each
    (:class:`EpisodeProtocolWarning`, naming the env ids):

    * ``info["time_outs"]`` that differs from ``truncated``: time-outs sent as ``terminated`` are
      trained as falls, without the bootstrap;
    * an env that runs past ``time_limit`` (the env's :func:`declared_time_limit`) without
      ``truncated``: an env that never reports time-outs.

    Per step only device operations; :meth:`report`, once per rollout, syncs once per fault seen.
    """

    def __init__(self, time_limit: int | None = None) -> None:
        self.time_limit = time_limit
        self._seen: dict[str, torch.Tensor] = {}
        self._warned: set[str] = set()

    def _add(self, kind: str, mask: torch.Tensor | None) -> None:
        if mask is not None and kind not in self._warned:
            self._seen[kind] = mask | self._seen[kind] if kind in self._seen else mask

    def flags(self, info: Mapping[str, Any], truncated: torch.Tensor) -> None:
        """One step's ``info`` and ``truncated`` ``[N]`` as the env reported them (before any blow-up recovery)."""
        self._add("time_outs", time_outs_mismatch(info, truncated))

    def lengths(self, episode_length: torch.Tensor, truncated: torch.Tensor) -> None:
        """Steps of each env's episode ``[N]``, this step counted, and the step's ``truncated`` ``[N]``."""
        if self.time_limit is not None:
            self._add("time_limit", time_limit_overrun(episode_length, truncated, self.time_limit))

    def report(self) -> None:
        """Warn about each fault seen since the last report, unless it was warned about before."""
        for kind, mask in self._seen.items():
            ids = torch.nonzero(mask).flatten().tolist()
            if not ids:
                continue
            self._warned.add(kind)
            if kind == "time_outs":
                message = (
                    f"info['time_outs'] differs from truncated for env ids {_id_text(ids)}: "
                    "time-outs sent as terminated are trained as falls"
                )
            else:
                message = (
                    f"env ids {_id_text(ids)} ran past the time limit max_episode_length={self.time_limit} "
                    "without truncated: the env may never report time-outs"
                )
            warnings.warn(message, EpisodeProtocolWarning, stacklevel=2)
        self._seen.clear()


class StepChecks:
    """The checks and repair of each step between env and storage, as the Runner is configured.

    ``validate``: the whole contract, final ids included, and finiteness (host syncs per step).
    ``reset_envs`` (``non_finite_obs="reset"``): the sync-free contract checks, then
    :func:`recover_non_finite` through it. ``time_limit``: :class:`FlagWatch`'s declared limit.
    """

    def __init__(self, num_envs: int, layout: ObsLayout, device: torch.device, validate: bool,
                 reset_envs: Callable[[torch.Tensor], Mapping[str, torch.Tensor]] | None = None,
                 time_limit: int | None = None) -> None:
        self.num_envs, self.layout, self.device = num_envs, layout, device
        self.validate, self.reset_envs = validate, reset_envs
        self.flag_watch = FlagWatch(time_limit)

    def __call__(self, result: StepResult, last_obs: Mapping[str, torch.Tensor]) -> tuple[StepResult, int]:
        """``(result, envs restarted after a blow-up)``; raises :class:`EpisodeProtocolError` on a broken step.
        ``last_obs``: the observation the step acted on (the blow-up rows' stand-in for ``s_final``)."""
        if self.validate or self.reset_envs is not None:  # the contract before any repair; only its ids check syncs
            check_contract(self.num_envs, result, self.layout, self.device, ids=self.validate)
        self.flag_watch.flags(result.info, result.truncated)
        broken = 0
        if self.reset_envs is not None:
            result, ids = recover_non_finite(result, {k: v.to(result.reward.device) for k, v in last_obs.items()},
                                             self.reset_envs)
            broken = ids.numel()
        if self.validate:
            check_finite(result)
        return result, broken
