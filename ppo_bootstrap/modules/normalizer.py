"""Empirical observation normalization with exact, mergeable running moments."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

Moments = tuple[torch.Tensor, torch.Tensor, torch.Tensor]
"""``(count, mean [D], m2 [D])`` of a batch, float64."""
MomentsReduce = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], Moments]


class EmpiricalNormalization(nn.Module):
    """``(x - mean) / (std + eps)`` with mean and variance of all observations seen so far.

    Moments are kept as ``count``, ``mean`` and ``m2`` (sum of squared deviations) in float64 and
    merged with Chan's parallel formula, so updating with batches ``a`` then ``b`` gives the moments
    of ``cat(a, b)`` exactly (up to rounding), and per-rank statistics can be combined the same way.

    Args:
        shape: feature shape ``[D]``.
        eps: added to the std.
    """

    def __init__(self, shape: int | tuple[int, ...], eps: float = 1e-2) -> None:
        super().__init__()
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        self.eps = eps
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))
        self.register_buffer("mean", torch.zeros(shape, dtype=torch.float64))
        self.register_buffer("m2", torch.zeros(shape, dtype=torch.float64))
        self.register_buffer("_mean32", torch.zeros(shape))
        self.register_buffer("_std32", torch.ones(shape))

    @property
    def std(self) -> torch.Tensor:
        """``[D]`` population std of everything seen (1 before any update)."""
        return self._std32

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalize ``x`` ``[..., D]``."""
        return (x - self._mean32) / (self._std32 + self.eps)

    @torch.no_grad()
    def update(self, x: torch.Tensor, reduce: MomentsReduce | None = None) -> None:
        """Merge the moments of ``x`` ``[B, D]`` into the running ones (a no-op in eval mode).

        ``reduce`` combines the batch moments of several processes before the merge (the trainer
        passes ``ppo_bootstrap.distributed.global_moments``, so every rank keeps the same
        statistics); the module itself knows nothing of processes.
        """
        if not self.training:
            return
        x = x.reshape(-1, *self.mean.shape).to(torch.float64)
        n_b = x.new_full((), float(x.shape[0]))  # filled on the device: a copy from the host would wait for its stream
        mean_b = x.mean(0)
        m2_b = ((x - mean_b) ** 2).sum(0)
        moments = (n_b, mean_b, m2_b) if reduce is None else reduce(n_b, mean_b, m2_b)
        self.merge(*moments)

    @torch.no_grad()
    def merge(self, n_b: torch.Tensor, mean_b: torch.Tensor, m2_b: torch.Tensor) -> None:
        """Merge moments ``(count, mean, m2)`` of another batch (Chan et al.)."""
        n_a = self.count
        n = n_a + n_b
        denom = n.clamp_min(1.0)  # no host sync: an empty merge leaves the moments as they are
        delta = mean_b - self.mean
        self.mean.add_(delta * (n_b / denom))
        self.m2.add_(m2_b + delta**2 * (n_a * n_b / denom))
        self.count.copy_(n)
        self._mean32.copy_(self.mean)
        self._std32.copy_(torch.sqrt(self.m2 / denom))
