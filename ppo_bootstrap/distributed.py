"""Data-parallel training over ``torch.distributed``: one process per GPU, each with its own envs.

Everything that must agree across ranks goes through the helpers here: gradients (averaged),
advantage statistics (global batch), observation-normalizer moments (the union of all ranks' data,
where rsl_rl keeps them per rank), and the KL that drives the adaptive learning rate, so every
rank takes the same decisions and the parameters stay identical. Rank 0 alone logs and writes
checkpoints. Launch with ``torchrun --nproc-per-node N script.py``; with a single process every
helper is a no-op.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def rank() -> int:
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def world_size() -> int:
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def init_from_env(device: str | torch.device | None = None) -> torch.device:
    """Join the process group ``torchrun`` describes (``WORLD_SIZE`` > 1); return this rank's device.

    NCCL for CUDA, gloo for CPU. Without ``torchrun`` this returns ``device`` (default ``cpu``).
    """
    requested = torch.device(device or "cpu")
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1 or dist.is_initialized():
        return requested
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if requested.type == "cuda":
        torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
        return torch.device("cuda", local_rank)
    dist.init_process_group("gloo")
    return requested


def all_reduce_sum_(tensor: torch.Tensor) -> torch.Tensor:
    """In-place sum over ranks (identity with one process)."""
    if is_distributed():
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


def all_reduce_mean_(tensor: torch.Tensor) -> torch.Tensor:
    """In-place mean over ranks (identity with one process)."""
    if is_distributed():
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        tensor /= dist.get_world_size()
    return tensor


def broadcast_module_(module: torch.nn.Module, src: int = 0) -> None:
    """Copy parameters and buffers of rank ``src`` to every rank."""
    if not is_distributed():
        return
    for tensor in list(module.parameters()) + list(module.buffers()):
        dist.broadcast(tensor.data, src=src)


def average_gradients_(parameters) -> None:
    """Average ``.grad`` over ranks in one flat all-reduce."""
    if not is_distributed():
        return
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return
    flat = torch.cat([g.reshape(-1) for g in grads])
    all_reduce_mean_(flat)
    offset = 0
    for g in grads:
        g.copy_(flat[offset : offset + g.numel()].view_as(g))
        offset += g.numel()


def global_moments(count: torch.Tensor, mean: torch.Tensor, m2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Combine per-rank ``(count, mean, m2)`` into the moments of the union of all ranks' samples.

    ``count`` is a scalar tensor, ``mean`` and ``m2`` (sum of squared deviations) ``[D]``; all float64.
    """
    if not is_distributed():
        return count, mean, m2
    total = all_reduce_sum_(count.clone())
    global_mean = all_reduce_sum_(mean * count) / total.clamp_min(1.0)
    global_m2 = all_reduce_sum_(m2 + count * (mean - global_mean) ** 2)
    return total, global_mean, global_m2
