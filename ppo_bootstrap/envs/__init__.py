"""Small synthetic envs that implement the :mod:`ppo_bootstrap.env` protocol (for tests and benchmarks)."""

from ppo_bootstrap.envs.time_limit import TimeLimitEnv

__all__ = ["TimeLimitEnv"]
