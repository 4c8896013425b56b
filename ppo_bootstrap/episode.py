"""Episode-end semantics: the one place that says what terminated, truncated and reset mean.

================  =============================  ============================  ==============
case              meaning                        value target of that step     lambda-trace
================  =============================  ============================  ==============
neither           episode goes on                ``r + gamma * V(s_{t+1})``    continues
terminated        real terminal state (fall)     ``r``                         cut
truncated         outside budget (time limit)    ``r + gamma * V(s_final)``    cut
both              terminated wins                ``r``                         cut
blow-up           non-finite obs / reward, with  ``r + gamma * V(s_t)``,       cut
                  ``non_finite_obs="reset"``     ``r`` zeroed if non-finite
================  =============================  ============================  ==============

``s_final`` is the true last observation captured before the same-step reset, never the post-reset
observation. Recurrent state resets on every done, but ``V(s_final)`` is evaluated with the
pre-reset hidden state. Everything in the library (GAE, storage, recurrent policies, Runner
statistics, adapters, evaluators) asks this module rather than re-deriving the rules. As in
TorchRL's functional value module, ``terminated`` and ``truncated`` (or ``done``) are arguments:

* :func:`done_mask`, :func:`bootstrap_mask`, :func:`continuation`: which steps end, bootstrap, continue;
* :func:`time_limit_as_terminal`: a finite-horizon task's time limit is a real end;
* :func:`terminal_for_targets`, :func:`bootstrap_values`, :func:`assemble_next_values`: the value
  targets per :data:`TimeoutBootstrap` mode, ``K = 0`` included;
* :func:`reset_memory`: recurrent state on done;
* :func:`validate_step`, :func:`recover_non_finite`: the step contract of :mod:`ppo_bootstrap.env`.

From env to GAE: ``env.step`` -> :class:`~ppo_bootstrap.env.StepResult` (``truncated``,
``final_env_ids``, ``final_obs``) -> ``PPO.process_env_step`` -> ``RolloutStorage.add`` keeps the
``K`` final rows with the pre-reset critic state -> ``PPO.compute_returns``: ``storage.finish()``,
:func:`bootstrap_values` (one critic pass over the ``K`` rows), :func:`assemble_next_values`,
:func:`terminal_for_targets` -> :func:`ppo_bootstrap.gae.compute_gae`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Literal

import torch

from ppo_bootstrap.env import StepResult


class EpisodeProtocolError(ValueError):
    """An env broke the step contract of :mod:`ppo_bootstrap.env`; the message names field and env ids."""


State = torch.Tensor | None
"""Recurrent state ``[S, N, H]`` (``S`` = layers, twice that for an LSTM), or ``None`` for feed-forward networks."""

TimeoutBootstrap = Literal["exact", "state_value", "none"]
"""How a truncated step is valued: ``exact`` ``r + gamma * V(s_final)`` (this library), ``state_value``
``r + gamma * V(s_t)`` (rsl_rl's approximation), ``none`` ``r`` (the timeout treated as a fall). The
last two exist for comparisons."""
TIMEOUT_BOOTSTRAP_MODES: tuple[str, ...] = ("exact", "state_value", "none")


def done_mask(terminated: torch.Tensor, truncated: torch.Tensor) -> torch.Tensor:
    """Episodes that ended this step, for any reason. Cuts the lambda-trace and resets memory."""
    return terminated | truncated


def bootstrap_mask(terminated: torch.Tensor, truncated: torch.Tensor) -> torch.Tensor:
    """Steps whose target bootstraps from ``V(s_final)``: truncated and not terminated."""
    return truncated & ~terminated


def continuation(terminated: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``1 - terminated`` as ``dtype``: the factor on ``gamma * V(next)`` in the TD error."""
    return (~terminated).to(dtype)


def time_limit_as_terminal(
    terminated: torch.Tensor, truncated: torch.Tensor, finite_horizon: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(terminated, truncated)`` as fresh bool tensors ``[N]``, with a finite horizon applied.

    For a finite-horizon task (Isaac Lab / mjlab ``cfg.is_finite_horizon``) the time limit is part of
    the MDP: a time-out is terminal, so ``terminated |= truncated``. ``truncated`` stays as reported;
    with both true "terminated wins" gives no bootstrap.
    """
    terminated = terminated.to(torch.bool).clone()
    truncated = truncated.to(torch.bool).clone()
    if finite_horizon:
        terminated |= truncated
    return terminated, truncated


def terminal_for_targets(terminated: torch.Tensor, truncated: torch.Tensor, mode: TimeoutBootstrap) -> torch.Tensor:
    """The ``terminated`` that value targets see ``[T, N]``: in mode ``none`` a timeout counts as a fall
    (no bootstrap, trace cut); otherwise the env's own flag."""
    return done_mask(terminated, truncated) if mode == "none" else terminated


def reset_memory(state: State, done: torch.Tensor) -> State:
    """Recurrent state ``[S, N, H]`` with the rows of ended envs zeroed (``done`` ``[N]`` bool); ``None``
    passes through (feed-forward networks).

    Called after ``V(s_final)``'s state was stored: the final value continues the old episode's
    memory, the next step starts the new episode from zero.
    """
    if state is None:
        return None
    return state * (~done.to(state.device)).to(state.dtype).view(1, -1, 1)


def assemble_next_values(
    values: torch.Tensor,
    last_values: torch.Tensor,
    final_values: torch.Tensor | None = None,
    final_steps: torch.Tensor | None = None,
    final_env_ids: torch.Tensor | None = None,
) -> torch.Tensor:
    """Value of the true next state of every step.

    Args:
        values: ``[T, N, ...]`` ``V(s_t)`` as stored during the rollout.
        last_values: ``[N, ...]`` ``V(s_T)``, the observation after the last step.
        final_values: ``[K, ...]`` ``V(s_final)`` of every episode that ended inside the rollout
            (``None`` or ``K = 0`` when none ended).
        final_steps: ``[K]`` long, the step ``t`` at which each of those episodes ended.
        final_env_ids: ``[K]`` long, its env id.

    Returns:
        ``[T, N, ...]``: ``V(s_final)`` where an episode ended at ``t``, ``V(s_{t+1})`` otherwise,
        ``last_values`` at ``t = T - 1``. Post-reset observations never leak into a target.
    """
    next_values = torch.cat([values[1:], last_values.unsqueeze(0)], dim=0)
    if final_values is not None and final_values.shape[0]:
        next_values[final_steps, final_env_ids] = final_values.to(next_values.dtype)
    return next_values


def bootstrap_values(
    mode: TimeoutBootstrap,
    values: torch.Tensor,
    final_steps: torch.Tensor,
    final_env_ids: torch.Tensor,
    critic_of_final: Callable[[], torch.Tensor],
) -> torch.Tensor:
    """The value that stands for ``V(s_final)`` in each ending row ``[K]``, per bootstrap mode.

    Args:
        mode: ``exact`` calls ``critic_of_final()`` (one batched critic pass over the ``K`` final
            observations, with the pre-reset recurrent state); ``state_value`` takes ``V(s_t)``
            from ``values`` ``[T, N]`` at ``(final_steps, final_env_ids)``; ``none`` gives zeros
            (those rows are made terminal by :func:`terminal_for_targets`, so nothing reads them).
    """
    if mode == "exact":
        return critic_of_final()
    if mode == "state_value":
        return values[final_steps, final_env_ids]
    return values.new_zeros(final_steps.shape[0], *values.shape[2:])


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


def validate_step(num_envs: int, result: StepResult) -> None:
    """Check one step against the env contract; raise :class:`EpisodeProtocolError` naming field and env ids.

    Costs a host synchronisation, so the Runner lets users switch it off on GPU once an env is trusted.
    """
    reward, terminated, truncated = result.reward, result.terminated, result.truncated
    obs, final_obs, final_env_ids = result.obs, result.final_obs, result.final_env_ids
    for name, flag in (("terminated", terminated), ("truncated", truncated)):
        if flag.dtype != torch.bool:
            raise EpisodeProtocolError(f"{name} must be a bool tensor, got dtype {flag.dtype}")
        if tuple(flag.shape) != (num_envs,):
            raise EpisodeProtocolError(f"{name} must have shape ({num_envs},), got {tuple(flag.shape)}")
    if tuple(reward.shape) != (num_envs,):
        raise EpisodeProtocolError(f"reward must have shape ({num_envs},), got {tuple(reward.shape)}")
    _check_finite("reward", reward)
    for group, value in obs.items():
        if value.shape[0] != num_envs:
            raise EpisodeProtocolError(f"obs[{group!r}] has {value.shape[0]} rows for {num_envs} envs")
        _check_finite(f"obs[{group!r}]", value)

    if final_env_ids.dim() != 1 or final_env_ids.dtype not in (torch.int32, torch.int64):
        raise EpisodeProtocolError(
            f"final_env_ids must be a 1-D integer tensor, got {final_env_ids.dtype} {tuple(final_env_ids.shape)}"
        )
    done = done_mask(terminated, truncated)
    expected = torch.nonzero(done).flatten()
    reported = final_env_ids.to(expected.device)
    if not torch.equal(reported, expected):
        reported_set, expected_set = set(reported.tolist()), set(expected.tolist())
        missing = sorted(expected_set - reported_set)
        extra = sorted(reported_set - expected_set)
        if missing:
            raise EpisodeProtocolError(f"final_obs missing for env ids {missing} that ended this step")
        if extra:
            raise EpisodeProtocolError(f"final_obs given for env ids {extra} that did not end this step")
        raise EpisodeProtocolError(
            f"final_env_ids must list each ended env once, in ascending order; got {reported.tolist()}"
        )
    if set(final_obs) != set(obs):
        raise EpisodeProtocolError(
            f"final_obs groups {sorted(final_obs)} differ from obs groups {sorted(obs)} "
            f"(env ids {expected.tolist()})"
        )
    for group, value in final_obs.items():
        if value.shape[0] != expected.numel() or value.shape[1:] != obs[group].shape[1:]:
            raise EpisodeProtocolError(
                f"final_obs[{group!r}] has shape {tuple(value.shape)}; expected "
                f"({expected.numel()}, *{tuple(obs[group].shape[1:])}) for env ids {expected.tolist()}"
            )
        _check_finite(f"final_obs[{group!r}]", value, final_env_ids)


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

    Returns:
        ``(result, broken_env_ids)``: the repaired :class:`~ppo_bootstrap.env.StepResult` (same
        contract; ``result`` itself is not modified) and the ``[B]`` ids that blew up.
    """
    obs, reward, final_obs, final_env_ids = result.obs, result.reward, result.final_obs, result.final_env_ids
    bad = _bad_rows(obs) | ~torch.isfinite(reward)
    bad_final = torch.zeros_like(bad)
    if final_env_ids.numel():
        bad_final[final_env_ids] = _bad_rows(final_obs)
    broken = torch.nonzero(bad | bad_final).flatten()
    if broken.numel() == 0:
        return result, broken

    fresh = reset_envs(broken)
    obs = {k: v.clone() for k, v in obs.items()}
    for k in obs:
        obs[k][broken] = fresh[k].to(obs[k].dtype)
    reward = torch.where(torch.isfinite(reward), reward, torch.zeros_like(reward))
    truncated = result.truncated.clone()
    truncated[broken] = True
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
