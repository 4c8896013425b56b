"""Episode-end semantics: the one place that says what terminated, truncated and reset mean.

================  =============================  ============================  ==============
case              meaning                        value target of that step     lambda-trace
================  =============================  ============================  ==============
neither           episode goes on                ``r + gamma * V(s_{t+1})``    continues
terminated        real terminal state (fall)     ``r``                         cut
truncated         outside budget (time limit)    ``r + gamma * V(s_final)``    cut
both              terminated wins                ``r``                         cut
blow-up           non-finite obs / reward, with  ``r + gamma * V(s_t)``,       cut
                  ``non_finite_obs="reset"``,    ``r`` zeroed if non-finite
                  or a physics state the env
                  finds non-finite
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
* :func:`end_step`: a step's done mask and the recurrent state after it (the one entry on the way in);
* :func:`value_targets`: a rollout's advantages and returns (the one entry on the way to GAE);
* :func:`blow_up_flags`, :func:`end_blow_ups`: the blow-up row, for the Runner's repair and for an
  env that finds and resets its own blow-ups without a host synchronisation (the G1 task on MuJoCo
  Warp: cause ``non_finite``).

The checks, repair and warnings of the step contract (:func:`check_contract`, :func:`check_finite`,
:func:`validate_step`, :func:`recover_non_finite`, :class:`FlagWatch`) live in
:mod:`ppo_bootstrap.episode_checks` and are importable from here too.

From env to GAE: ``env.step`` -> :class:`~ppo_bootstrap.env.StepResult` (``truncated``,
``final_env_ids``, ``final_obs``, or the dense ``final_obs_all``; :func:`final_rows` reads either)
-> ``PPO.process_env_step`` -> ``RolloutStorage.add`` keeps the ``K`` final rows with the pre-reset
critic state (of the dense form, every env's critic row, the ended ones picked once per rollout)
-> ``PPO.compute_returns``: ``storage.finish()``, :func:`bootstrap_values` (one critic pass over
the ``K`` rows), :func:`assemble_next_values`, :func:`terminal_for_targets` ->
:func:`ppo_bootstrap.gae.compute_gae`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Literal, get_args

import torch

from ppo_bootstrap.env import ObsGroups, StepResult


class EpisodeProtocolError(ValueError):
    """An env broke the step contract of :mod:`ppo_bootstrap.env`; the message names field and env ids."""


State = torch.Tensor | None
"""Recurrent state ``[S, N, H]`` (``S`` = layers, twice that for an LSTM), or ``None`` for feed-forward networks."""

TimeoutBootstrap = Literal["exact", "state_value", "none"]
"""How a truncated step is valued: ``exact`` ``r + gamma * V(s_final)`` (this library), ``state_value``
``r + gamma * V(s_t)`` (rsl_rl's approximation), ``none`` ``r`` (the timeout treated as a fall). The
last two exist for comparisons."""
TIMEOUT_BOOTSTRAP_MODES: tuple[str, ...] = get_args(TimeoutBootstrap)


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


def final_rows(result: StepResult) -> tuple[torch.Tensor, ObsGroups]:
    """``(final_env_ids [K], final_obs)`` of a step, from either form of the contract.

    The sparse form passes through. The dense form (``final_obs_all`` ``[N, ...]``) gives the rows of
    the envs that ended (``terminated | truncated``), ascending: one ``nonzero``, a host
    synchronisation on a GPU, so the per-step hot path (:class:`~ppo_bootstrap.storage.RolloutStorage`)
    does not call this.
    """
    if result.final_obs_all is None:
        if result.final_obs is None or result.final_env_ids is None:
            raise EpisodeProtocolError("a step result needs final_obs and final_env_ids, or final_obs_all")
        return result.final_env_ids, result.final_obs
    ids = torch.nonzero(done_mask(result.terminated, result.truncated)).flatten()
    return ids, {group: value[ids] for group, value in result.final_obs_all.items()}


def sparse(result: StepResult) -> StepResult:
    """``result`` in the sparse form (``final_env_ids`` and ``final_obs`` ``[K]``); itself if it is."""
    if result.final_obs_all is None:
        return result
    ids, rows = final_rows(result)
    return dataclasses.replace(result, final_obs=rows, final_env_ids=ids, final_obs_all=None)


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


def end_step(terminated: torch.Tensor, truncated: torch.Tensor, states: tuple[State, ...]) -> tuple[torch.Tensor, tuple[State, ...]]:
    """A stored step's ends: ``(done [N], states with the ended envs' memory zeroed)``.

    The one entry on the way in: storage has kept the pre-reset critic state (``V(s_final)``
    continues it), the next step starts the new episodes from zero (:func:`reset_memory`).
    """
    done = done_mask(terminated, truncated)
    return done, tuple(reset_memory(s, done) for s in states)


def value_targets(
    mode: TimeoutBootstrap,
    rewards: torch.Tensor,
    values: torch.Tensor,
    last_values: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    final_steps: torch.Tensor | None,
    final_env_ids: torch.Tensor | None,
    critic_of_final: Callable[[], torch.Tensor],
    gamma: float,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A rollout's ``(advantages [T, N], returns [T, N], timeout_values [B])``: the one entry on the
    way from ``truncated`` to GAE.

    ``V(s_final)`` of the ``K`` ending rows ``(final_steps, final_env_ids)`` (``None``: none ended)
    per ``mode`` (:func:`bootstrap_values`), the true next values (:func:`assemble_next_values`),
    the terminals the targets see (:func:`terminal_for_targets`), then
    :func:`ppo_bootstrap.gae.compute_gae`. ``timeout_values``: the ``V(s_final)`` standing in the
    ``B`` rows that bootstrap (truncated, not terminated), for statistics.
    """
    from ppo_bootstrap.gae import compute_gae  # gae reads this module's rules

    if final_steps is None or final_env_ids is None:
        next_values, timeout_values = assemble_next_values(values, last_values), values.new_zeros(0)
    else:
        final_values = bootstrap_values(mode, values, final_steps, final_env_ids, critic_of_final)
        next_values = assemble_next_values(values, last_values, final_values, final_steps, final_env_ids)
        timeout_values = final_values[bootstrap_mask(terminated, truncated)[final_steps, final_env_ids]]
    targets_terminated = terminal_for_targets(terminated, truncated, mode)
    advantages, returns = compute_gae(rewards, values, next_values, targets_terminated, truncated, gamma, lam)
    return advantages, returns, timeout_values


def blow_up_flags(
    reward: torch.Tensor, truncated: torch.Tensor, broken: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The blow-up row of the table for the envs ``broken`` ``[N]`` bool: ``(reward, truncated)`` with
    the reward zeroed where it is non-finite and ``truncated`` set where broken (fresh tensors; a
    fall on the same step stays a fall, ``terminated`` is left as it is). No host synchronisation."""
    reward = torch.where(torch.isfinite(reward), reward, torch.zeros_like(reward))
    return reward, truncated | broken.to(truncated.device)


def end_blow_ups(result: StepResult, last_obs: Mapping[str, torch.Tensor], broken: torch.Tensor) -> StepResult:
    """The dense form of :func:`~ppo_bootstrap.episode_checks.recover_non_finite`, for an env that finds
    its own blow-ups and resets them with the step's other ends: no host synchronisation, fixed shapes.

    ``result`` is in the dense form (``final_obs_all``), its ``obs`` already the restarted rows;
    ``broken`` ``[N]`` bool marks the envs whose state went non-finite this step and ``last_obs`` the
    observations ``s_t`` the policy acted on. Returns a new result with :func:`blow_up_flags` applied
    and the final rows of the broken envs replaced by ``s_t``, so that their value target is
    ``r + gamma * V(s_t)`` and never reads a non-finite observation.
    """
    if result.final_obs_all is None:
        raise EpisodeProtocolError("end_blow_ups needs the dense form of a step (final_obs_all)")
    reward, truncated = blow_up_flags(result.reward, result.truncated, broken)
    final = {group: torch.where(broken.view(-1, *([1] * (value.dim() - 1))), last_obs[group].to(value.dtype), value)
             for group, value in result.final_obs_all.items()}
    return dataclasses.replace(result, reward=reward, truncated=truncated, final_obs_all=final)


_CHECKS = ("EpisodeProtocolWarning", "FlagWatch", "ObsLayout", "StepChecks", "check_contract", "check_finite",
           "declared_time_limit", "obs_layout", "recover_non_finite", "time_limit_overrun", "time_outs_mismatch",
           "validate_step")


def __getattr__(name: str) -> Any:
    """The contract's checks, repair and warnings, from :mod:`ppo_bootstrap.episode_checks` (their
    old import path: that module builds on this one, so it is read on first use)."""
    if name in _CHECKS:
        from ppo_bootstrap import episode_checks

        return getattr(episode_checks, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
