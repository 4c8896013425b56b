"""Unitree G1 velocity-command walking: config, cause table, task terms, the simulator-independent
task (:class:`G1WalkTask`, DirectRLEnv hooks), its env on the embedded physics backends
(:class:`G1WalkEnv`), model assets, the evaluator's probe (:mod:`.probe`) and rendering (:mod:`.render`)."""

from isaac_adapter.tasks.g1_walk.config import G1WalkConfig, RewardWeights
from isaac_adapter.tasks.g1_walk.env import G1WalkEnv
from isaac_adapter.tasks.g1_walk.task import G1WalkTask

__all__ = ["G1WalkConfig", "G1WalkEnv", "G1WalkTask", "RewardWeights"]
