"""Generalized advantage estimation with separate termination and truncation, as pure functions.

Shapes: ``T`` rollout steps, ``N`` envs, ``*`` optional trailing dims (e.g. several value heads).
The done flags are ``[T, N]`` and broadcast over the trailing dims.

Per step (see :mod:`ppo_bootstrap.episode` for the rules):

    delta_t = r_t + gamma * (1 - terminated_t) * next_values_t - values_t
    A_t     = delta_t + gamma * lam * (1 - done_t) * A_{t+1},   done = terminated | truncated
    returns = A + values
"""

from __future__ import annotations

import torch

from ppo_bootstrap import gae_triton
from ppo_bootstrap.episode import done_mask


def _expand_flag(flag: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return flag.reshape(flag.shape + (1,) * (like.dim() - flag.dim()))


def _check_shapes(rewards, values, next_values, terminated, truncated) -> None:
    if not (rewards.shape == values.shape == next_values.shape):
        raise ValueError(
            f"rewards {tuple(rewards.shape)}, values {tuple(values.shape)} and next_values "
            f"{tuple(next_values.shape)} must have the same shape [T, N, ...]"
        )
    for name, flag in (("terminated", terminated), ("truncated", truncated)):
        if flag.dtype != torch.bool:
            raise ValueError(f"{name} must be a bool tensor, got {flag.dtype}")
        if tuple(flag.shape) != tuple(rewards.shape[:2]):
            raise ValueError(f"{name} must have shape {tuple(rewards.shape[:2])} [T, N], got {tuple(flag.shape)}")


def td_errors(
    rewards: torch.Tensor,
    values: torch.Tensor,
    next_values: torch.Tensor,
    terminated: torch.Tensor,
    gamma: float,
) -> torch.Tensor:
    """``delta = r + gamma * (1 - terminated) * next_values - values``, all ``[T, N, *]``.

    The bootstrap term is *selected away* at terminated steps rather than multiplied by zero, so a
    NaN/inf ``next_values`` there (a blown-up final state) never reaches the result.
    """
    term = _expand_flag(terminated, next_values)
    bootstrap = torch.where(term, torch.zeros((), dtype=next_values.dtype, device=next_values.device), next_values)
    return rewards + gamma * bootstrap - values


def compute_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    next_values: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    gamma: float,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages and returns; the implementation training uses.

    Args:
        rewards: ``[T, N, *]`` float.
        values: ``[T, N, *]`` ``V(s_t)``.
        next_values: ``[T, N, *]`` value of the true next state of step ``t``: ``V(s_final)`` where
            the episode ended at ``t``, ``V(s_{t+1})`` otherwise, ``V(s_T)`` at ``t = T - 1``
            (see :func:`ppo_bootstrap.episode.assemble_next_values`).
        terminated: ``[T, N]`` bool.
        truncated: ``[T, N]`` bool.
        gamma: discount.
        lam: GAE lambda.

    Returns:
        ``(advantages, returns)``, each ``[T, N, *]`` with the dtype of ``rewards``.

    On CUDA (float32 ``[T, N]``, Triton present) this is one fused kernel launch
    (:mod:`ppo_bootstrap.gae_triton`). Elsewhere all elementwise work happens in three batched
    kernels and the backward recursion is one fused multiply-add per step, written straight into
    the output (no per-step temporaries).
    """
    _check_shapes(rewards, values, next_values, terminated, truncated)
    if rewards.is_cuda and rewards.dim() == 2 and rewards.dtype == torch.float32 and gae_triton.available():
        return gae_triton.compute_gae_triton(rewards, values, next_values, terminated, truncated, gamma, lam)
    delta = td_errors(rewards, values, next_values, terminated, gamma)
    # gamma * lam where the trace continues, 0 where any episode end cuts it.
    trace = _expand_flag(~done_mask(terminated, truncated), delta).to(delta.dtype).mul_(gamma * lam)
    advantages = delta  # the recursion runs in place: A_t only reads delta_t and A_{t+1}
    for t in range(delta.shape[0] - 2, -1, -1):
        advantages[t].addcmul_(trace[t], advantages[t + 1])
    return advantages, advantages + values


def compute_gae_reference(
    rewards: torch.Tensor, values: torch.Tensor, next_values: torch.Tensor, terminated: torch.Tensor,
    truncated: torch.Tensor, gamma: float, lam: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The same quantity as :func:`compute_gae`, written as the textbook backward loop.

    Slow on purpose: one step at a time, nothing fused. Tests hold the fast version to it; run it in
    float64 for a reference.
    """
    _check_shapes(rewards, values, next_values, terminated, truncated)
    advantages = torch.zeros_like(rewards)
    next_advantage = torch.zeros_like(rewards[0])
    for t in reversed(range(rewards.shape[0])):
        term = _expand_flag(terminated[t], rewards[t])
        done = _expand_flag(terminated[t] | truncated[t], rewards[t])
        bootstrap = torch.where(term, torch.zeros_like(next_values[t]), next_values[t])
        delta = rewards[t] + gamma * bootstrap - values[t]
        next_advantage = delta + gamma * lam * (~done).to(rewards.dtype) * next_advantage
        advantages[t] = next_advantage
    return advantages, advantages + values
