"""Unitree G1 velocity-command walking: config, task terms, env and model assets."""

from isaac_adapter.tasks.g1_walk.config import G1WalkConfig, RewardWeights
from isaac_adapter.tasks.g1_walk.env import G1WalkEnv

__all__ = ["G1WalkConfig", "G1WalkEnv", "RewardWeights"]
