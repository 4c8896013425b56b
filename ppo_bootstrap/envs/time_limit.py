"""A never-ending task cut by a time limit: the cleanest test of timeout bootstrapping.

Every step pays ``reward`` whatever the action, so the true value of every state is
``reward / (1 - gamma)`` (50 for reward 1 and gamma 0.98). Episodes are cut after
``episode_length`` steps (truncated), and, with ``fall_probability > 0``, end at random
(terminated). Observations are i.i.d. noise, so nothing in them reveals the time left: a critic
that treats timeouts as terminal can only learn the average truncated return, well below the truth.
Episode clocks start staggered so timeouts are spread over the rollout, as in a real vectorized env.
"""

from __future__ import annotations

from typing import Any

import torch

from ppo_bootstrap.env import CRITIC, POLICY, ObsGroups, StepResult, check_actions
from ppo_bootstrap.episode import done_mask


class TimeLimitEnv:
    """``num_envs`` copies of the reward-every-step task; implements :class:`ppo_bootstrap.env.VecEnv`."""

    def __init__(
        self,
        num_envs: int = 64,
        episode_length: int = 100,
        obs_dim: int = 4,
        privileged_dim: int = 0,
        num_actions: int = 2,
        reward: float = 1.0,
        fall_probability: float = 0.0,
        nan_probability: float = 0.0,
        seed: int = 0,
        device: str | torch.device = "cpu",
    ) -> None:
        if episode_length < 1:
            raise ValueError(f"episode_length must be >= 1, got {episode_length}")
        if not 0.0 <= fall_probability <= 1.0:
            raise ValueError(f"fall_probability must lie in [0, 1], got {fall_probability}")
        self.num_envs = num_envs
        self.num_actions = num_actions
        self.device = torch.device(device)
        self.episode_length = episode_length
        self.obs_dim = obs_dim
        self.privileged_dim = privileged_dim
        self.reward = reward
        self.fall_probability = fall_probability
        self.nan_probability = nan_probability  # injected physics blow-ups, for fault tests
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self.step_count = torch.zeros(num_envs, dtype=torch.long, device=self.device)
        self.obs: ObsGroups = {}

    @property
    def max_episode_length(self) -> int:
        """The declared time limit (:func:`ppo_bootstrap.episode.declared_time_limit`): ``episode_length``."""
        return self.episode_length

    def _sample_obs(self, n: int) -> ObsGroups:
        obs = {POLICY: torch.randn(n, self.obs_dim, generator=self.generator, device=self.device)}
        if self.privileged_dim:
            extra = torch.randn(n, self.privileged_dim, generator=self.generator, device=self.device)
            obs[CRITIC] = torch.cat([obs[POLICY], extra], dim=-1)
        return obs

    def reset(self) -> ObsGroups:
        self.step_count = torch.randint(
            0, self.episode_length, (self.num_envs,), generator=self.generator, device=self.device
        )
        self.obs = self._sample_obs(self.num_envs)
        return {k: v.clone() for k, v in self.obs.items()}

    def step(self, actions: torch.Tensor) -> StepResult:
        check_actions(actions, self.num_envs, self.num_actions, self.device)
        self.step_count += 1
        reward = torch.full((self.num_envs,), self.reward, device=self.device)
        truncated = self.step_count >= self.episode_length
        fall_draw = torch.rand(self.num_envs, generator=self.generator, device=self.device)
        terminated = fall_draw < self.fall_probability
        next_obs = self._sample_obs(self.num_envs)  # the true next state of every env
        ended = torch.nonzero(done_mask(terminated, truncated)).flatten()
        final_obs = {k: v[ended].clone() for k, v in next_obs.items()}
        if ended.numel():  # same-step auto-reset: ended envs start over and show a fresh state
            reset_obs = self._sample_obs(ended.numel())
            for k in next_obs:
                next_obs[k][ended] = reset_obs[k]
            self.step_count[ended] = 0
        self.obs = next_obs
        if self.nan_probability:
            blown = torch.rand(self.num_envs, generator=self.generator, device=self.device) < self.nan_probability
            next_obs[POLICY][blown] = float("nan")
        return StepResult(
            obs={k: v.clone() for k, v in next_obs.items()},
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            final_obs=final_obs,
            final_env_ids=ended,
            info={"log": {"timeouts": float(truncated.sum()), "falls": float(terminated.sum())}},
        )

    def reset_envs(self, env_ids: torch.Tensor) -> ObsGroups:
        """Restart ``env_ids`` now; return their fresh observation rows."""
        fresh = self._sample_obs(env_ids.numel())
        for k in self.obs:
            self.obs[k][env_ids] = fresh[k]
        self.step_count[env_ids] = 0
        return {k: v.clone() for k, v in fresh.items()}

    def state_dict(self) -> dict[str, Any]:
        return {"generator": self.generator.get_state(), "step_count": self.step_count.clone(), "obs": dict(self.obs)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.generator.set_state(state["generator"].cpu())
        self.step_count = state["step_count"].to(self.device)
        self.obs = {k: v.to(self.device) for k, v in state["obs"].items()}
