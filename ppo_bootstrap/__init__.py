"""ppo_bootstrap: PPO for GPU-vectorized robot learning that never confuses a fall with a timeout."""

from ppo_bootstrap.checkpoint import CheckpointError
from ppo_bootstrap.env import CRITIC, POLICY, ObsGroups, StepResult, VecEnv
from ppo_bootstrap.episode import (
    EpisodeProtocolError,
    TimeoutBootstrap,
    assemble_next_values,
    bootstrap_mask,
    done_mask,
    reset_memory,
)
from ppo_bootstrap.gae import compute_gae, compute_gae_reference
from ppo_bootstrap.modules import ActorCritic, PolicyConfig
from ppo_bootstrap.ppo import PPO, PPOConfig
from ppo_bootstrap.runner import Runner, RunnerConfig
from ppo_bootstrap.storage import RolloutStorage, TerminalRows, Transition
from ppo_bootstrap.symmetry import SignPermutation, Symmetry

__version__ = "0.1.0"

__all__ = [
    "CRITIC",
    "POLICY",
    "PPO",
    "ActorCritic",
    "CheckpointError",
    "EpisodeProtocolError",
    "ObsGroups",
    "PPOConfig",
    "PolicyConfig",
    "RolloutStorage",
    "Runner",
    "RunnerConfig",
    "SignPermutation",
    "StepResult",
    "Symmetry",
    "TerminalRows",
    "TimeoutBootstrap",
    "Transition",
    "VecEnv",
    "assemble_next_values",
    "bootstrap_mask",
    "compute_gae",
    "compute_gae_reference",
    "done_mask",
    "reset_memory",
]
