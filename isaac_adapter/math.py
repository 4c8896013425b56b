"""Batched rotation helpers. Quaternions are ``(w, x, y, z)`` and rotate body to world."""

from __future__ import annotations

import torch


def quat_apply(quat: torch.Tensor, vec: torch.Tensor) -> torch.Tensor:
    """Rotate ``vec`` ``[..., 3]`` from body to world by ``quat`` ``[..., 4]``."""
    w, xyz = quat[..., :1], quat[..., 1:]
    t = 2.0 * torch.cross(xyz, vec, dim=-1)
    return vec + w * t + torch.cross(xyz, t, dim=-1)


def quat_apply_inverse(quat: torch.Tensor, vec: torch.Tensor) -> torch.Tensor:
    """Rotate ``vec`` ``[..., 3]`` from world to body by the inverse of ``quat`` ``[..., 4]``."""
    w, xyz = quat[..., :1], quat[..., 1:]
    t = 2.0 * torch.cross(xyz, vec, dim=-1)
    return vec - w * t + torch.cross(xyz, t, dim=-1)


def yaw_quat(yaw: torch.Tensor) -> torch.Tensor:
    """Quaternion ``[..., 4]`` of a rotation by ``yaw`` ``[...]`` about world z."""
    half = 0.5 * yaw
    zero = torch.zeros_like(half)
    return torch.stack([torch.cos(half), zero, zero, torch.sin(half)], dim=-1)


def rows_of(mask: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``mask`` ``[N]`` shaped to broadcast over the rows of ``like`` ``[N, ...]``."""
    return mask.view(-1, *([1] * (like.dim() - 1)))


def put_rows(buffer: torch.Tensor, mask: torch.Tensor, value: torch.Tensor) -> None:
    """``buffer[mask] = value[mask]`` over the rows ``[N, ...]`` of both, in place: one kernel, fixed
    shapes, no host synchronisation (boolean indexing would need the count of true rows)."""
    torch.where(rows_of(mask, buffer), value, buffer, out=buffer)
