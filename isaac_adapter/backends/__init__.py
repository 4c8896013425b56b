"""Physics backends. Each one steps ``num_envs`` copies of one robot and exposes batched torch state."""

from isaac_adapter.backends.base import PhysicsBackend, PhysicsState

__all__ = ["PhysicsBackend", "PhysicsState"]
