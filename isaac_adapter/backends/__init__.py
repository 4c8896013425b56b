"""Physics backends. Each one steps ``num_envs`` copies of one robot and exposes batched torch state."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from isaac_adapter.backends.base import PhysicsBackend, PhysicsState

__all__ = ["PhysicsBackend", "PhysicsState"]


def __getattr__(name: str) -> Any:
    # on first use, so that a module of this package that needs no torch (a compile worker's) imports without it
    if name in __all__:
        from isaac_adapter.backends import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
