"""Left-right mirror symmetry of a task: mirrored observations and actions for PPO.

A robot that is symmetric about its sagittal plane solves a mirrored situation with the mirrored
action. PPO can use that in two ways (:class:`~ppo_bootstrap.ppo.PPOConfig`):

* ``symmetry_augmentation``: every mini-batch is trained on its mirror image too, so each sample
  teaches the policy and the critic twice;
* ``symmetry_loss_coef``: a mirror loss ``|| mu(mirror(o)) - mirror(mu(o)) ||^2`` on the actor's mean
  pulls the policy towards equivariance.

A task describes its mirror with a :class:`Symmetry`: one :data:`Mirror` per observation group and
one for the actions. Mirrors of robot tasks are signed permutations (a left joint becomes the right
one, a roll angle changes sign), which :class:`SignPermutation` applies as one gather and one
multiply: no host synchronisation and static shapes, so it runs inside a captured CUDA graph.

An env offers its mirror as the attribute (or property) ``symmetry``, a :class:`Symmetry`; the
Runner reads it, or its ``unwrapped`` env's, when the PPO configuration asks for one
(:func:`env_symmetry`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from ppo_bootstrap.env import CRITIC, POLICY, ObsGroups

Mirror = Callable[[torch.Tensor], torch.Tensor]
"""A mirror of one kind of vector: ``[..., D]`` -> ``[..., D]``, its own inverse (an involution);
for robots a :class:`SignPermutation`."""


@dataclass(frozen=True, eq=False)
class SignPermutation:
    """The mirror ``y[..., i] = sign[i] * x[..., index[i]]`` of ``D``-vectors.

    Args:
        index: ``[D]`` a permutation of ``0 .. D-1`` (an integer tensor or sequence, kept as long).
        sign: ``[D]`` entries ``+1`` or ``-1`` (a tensor or sequence, kept as float32 on ``index``'s device).

    Raises:
        ValueError: in one line naming the field, unless ``index`` is a permutation, ``sign`` holds
            only ``+-1`` with one entry per index, and the map is an involution (applied twice it
            gives back its input: ``index[index[i]] == i`` and ``sign[i] * sign[index[i]] == 1``).
    """

    index: torch.Tensor
    sign: torch.Tensor

    def __post_init__(self) -> None:
        index = torch.as_tensor(self.index)
        sign = torch.as_tensor(self.sign)
        if index.dim() != 1 or (index.numel() and (index.dtype.is_floating_point or index.dtype == torch.bool)):
            raise ValueError(f"index must be a 1-D sequence of integers, got {index.dtype} of shape {tuple(index.shape)}")
        index = index.to(torch.long)
        size, device = index.numel(), index.device
        if not torch.equal(torch.sort(index.cpu()).values, torch.arange(size)):
            raise ValueError(f"index must be a permutation of 0..{size - 1}, got {index.tolist()}")
        if tuple(sign.shape) != (size,):
            raise ValueError(f"sign must have one entry per index ({size}), got shape {tuple(sign.shape)}")
        sign = sign.to(device, torch.float32)
        if not bool(((sign == 1) | (sign == -1)).all()):
            raise ValueError(f"sign must hold only +1 and -1, got {sign.tolist()}")
        ic, sc = index.cpu(), sign.cpu()
        moved = torch.nonzero(ic[ic] != torch.arange(size)).flatten()
        if moved.numel():
            i = int(moved[0])
            raise ValueError(f"index is not an involution: entry {i} goes to {int(ic[i])}, which goes to {int(ic[ic[i]])}")
        flipped = torch.nonzero(sc * sc[ic] != 1).flatten()
        if flipped.numel():
            i = int(flipped[0])
            raise ValueError(f"sign is not an involution: entries {i} and {int(ic[i])} swap with signs "
                             f"{int(sc[i])} and {int(sc[ic[i]])}; a swapped pair needs equal signs")
        object.__setattr__(self, "index", index)
        object.__setattr__(self, "sign", sign)

    @classmethod
    def identity(cls, size: int) -> SignPermutation:
        """The mirror that changes nothing, for ``size``-vectors (a height, a forward speed...)."""
        return cls(torch.arange(size), torch.ones(size))

    @classmethod
    def concat(cls, *parts: SignPermutation) -> SignPermutation:
        """The mirror of the concatenation of vectors, each mirrored by its part (block diagonal)."""
        index, sign, offset = [], [], 0
        for part in parts:
            index.append(part.index.cpu() + offset)
            sign.append(part.sign.cpu())
            offset += part.size
        return cls(torch.cat(index) if index else torch.zeros(0, dtype=torch.long), torch.cat(sign) if sign else torch.zeros(0))

    @property
    def size(self) -> int:
        """``D``, the width of the vectors it mirrors."""
        return int(self.index.numel())

    def to(self, device: torch.device | str) -> SignPermutation:
        """This mirror with its index and signs on ``device``."""
        mirror = object.__new__(SignPermutation)
        object.__setattr__(mirror, "index", self.index.to(device))
        object.__setattr__(mirror, "sign", self.sign.to(device))
        return mirror

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Mirror ``x`` ``[..., D]`` -> ``[..., D]`` (differentiable). Keep the mirror on ``x``'s device
        (:meth:`to`), or every call copies its index there."""
        if x.shape[-1] != self.size:
            raise ValueError(f"this mirror maps vectors of width {self.size}, got shape {tuple(x.shape)}")
        index, sign = self.index, self.sign
        if index.device != x.device:
            index, sign = index.to(x.device), sign.to(x.device)
        return x.index_select(-1, index) * sign.to(x.dtype)

    def matrix(self, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """The ``[D, D]`` matrix ``M`` with ``mirror(x) = x @ M.T`` (for checks and analysis)."""
        m = torch.zeros(self.size, self.size, dtype=dtype)
        m[torch.arange(self.size), self.index.cpu()] = self.sign.cpu().to(dtype)
        return m


@dataclass(frozen=True)
class Symmetry:
    """How a task mirrors: one :data:`Mirror` per observation group and one for the actions.

    Attributes:
        observations: group name -> mirror of that group's ``[..., D_g]`` rows; ``"policy"`` is
            required, and ``"critic"`` too where the env has that group.
        actions: mirror of ``[..., A]`` actions.

    Every mirror must be its own inverse, and an environment that is mirror-symmetric must map a
    state and its mirror image to mirrored observations, rewards and next states under mirrored
    actions (see :func:`check`); a :class:`SignPermutation` is checked at construction.
    """

    observations: Mapping[str, Mirror]
    actions: Mirror

    def __post_init__(self) -> None:
        if not isinstance(self.observations, Mapping) or POLICY not in self.observations:
            raise ValueError(f"observations must map each observation group to its mirror, {POLICY!r} included; "
                             f"got {type(self.observations).__name__}")
        for group, mirror in self.observations.items():
            if not callable(mirror):
                raise ValueError(f"observations[{group!r}] must be a mirror (a callable), got {type(mirror).__name__}")
        if not callable(self.actions):
            raise ValueError(f"actions must be a mirror (a callable), got {type(self.actions).__name__}")
        object.__setattr__(self, "observations", dict(self.observations))  # a copy: later edits of the argument do not leak in

    def mirror_group(self, group: str, x: torch.Tensor) -> torch.Tensor:
        """Mirror ``x`` ``[..., D_group]``, rows of observation group ``group``."""
        mirror = self.observations.get(group)
        if mirror is None:
            raise KeyError(f"this symmetry has no mirror for observation group {group!r} (it has {sorted(self.observations)})")
        return mirror(x)

    def mirror_obs(self, obs: ObsGroups) -> ObsGroups:
        """Mirror every group of ``obs`` (``{group: [..., D_group]}``)."""
        return {group: self.mirror_group(group, value) for group, value in obs.items()}

    def mirror_actions(self, actions: torch.Tensor) -> torch.Tensor:
        """Mirror ``actions`` ``[..., A]``."""
        return self.actions(actions)

    def to(self, device: torch.device | str) -> Symmetry:
        """This symmetry with every :class:`SignPermutation` on ``device`` (other mirrors as they are)."""

        def move(mirror: Mirror) -> Mirror:
            return mirror.to(device) if isinstance(mirror, SignPermutation) else mirror

        return Symmetry({g: move(m) for g, m in self.observations.items()}, move(self.actions))

    def check(self, obs: ObsGroups, num_actions: int) -> None:
        """Raise ``ValueError`` in one line unless this symmetry fits an env with observation groups
        like ``obs`` (``{group: [N, D_group]}``) and ``num_actions`` actions: a mirror for the groups
        the learner reads (``policy``, and ``critic`` where present), widths kept, and each mirror
        gives back ``obs`` (and random actions) when applied twice."""
        for group in (POLICY, CRITIC):
            if group not in obs:
                continue
            if group not in self.observations:
                raise ValueError(f"the symmetry has no mirror for the env's {group!r} observations "
                                 f"(it has {sorted(self.observations)})")
            _check_involution(f"observations[{group!r}]", self.observations[group], obs[group])
        probe = torch.randn(2, num_actions, generator=torch.Generator().manual_seed(0)).to(obs[POLICY].device)
        _check_involution("actions", self.actions, probe)


def _check_involution(name: str, mirror: Mirror, x: torch.Tensor) -> None:
    if isinstance(mirror, SignPermutation) and mirror.size != x.shape[-1]:
        raise ValueError(f"the symmetry's {name} mirror maps width {mirror.size}, the env's width is {x.shape[-1]}")
    with torch.no_grad():
        y = mirror(x)
        if y.shape != x.shape:
            raise ValueError(f"the symmetry's {name} mirror changes shape {tuple(x.shape)} to {tuple(y.shape)}")
        if not torch.allclose(mirror(y), x, rtol=1e-5, atol=1e-6):
            raise ValueError(f"the symmetry's {name} mirror is not an involution: mirroring twice changes the input")


def env_symmetry(env: Any) -> Symmetry:
    """The :class:`Symmetry` an env offers: its attribute ``symmetry``, or its ``unwrapped`` env's.

    Raises:
        ValueError: in one line, naming the env and what to do, when neither has one or it is no
            :class:`Symmetry`.
    """
    for candidate in (env, getattr(env, "unwrapped", None)):
        symmetry = getattr(candidate, "symmetry", None) if candidate is not None else None
        if symmetry is None:
            continue
        if not isinstance(symmetry, Symmetry):
            raise ValueError(f"{type(candidate).__name__}.symmetry must be a ppo_bootstrap.Symmetry, "
                             f"got {type(symmetry).__name__}")
        return symmetry
    raise ValueError(f"PPOConfig asks for symmetry (symmetry_augmentation or symmetry_loss_coef) but the env "
                     f"{type(env).__name__} has no 'symmetry': give it a 'symmetry' attribute (a "
                     "ppo_bootstrap.Symmetry) or set symmetry_augmentation=False and symmetry_loss_coef=0")

