"""A tiny env whose every observation, reward and episode end is fixed in advance (for hand-derived tests)."""

from __future__ import annotations

import torch

from ppo_bootstrap.env import CRITIC, POLICY, StepResult


class ScriptedEnv:
    """One scalar observation per env.

    Ordinary steps add 1 to the observation. An env listed in ``ends`` at step ``t`` as
    ``(terminated, truncated)`` shows the final observation ``100 + 10 * env + t`` and then restarts
    at ``50 + env`` (same-step auto-reset), so V(s_t), V(s_final) and V(reset) all differ.
    ``dense=True`` reports the final observations in the contract's dense form (``final_obs_all``).
    """

    def __init__(
        self, num_envs: int, ends: dict[tuple[int, int], tuple[bool, bool]], privileged: bool = False, dense: bool = False
    ):
        self.num_envs, self.num_actions, self.device = num_envs, 1, torch.device("cpu")
        self.ends, self.privileged, self.dense, self.t = ends, privileged, dense, 0
        self.x = torch.zeros(num_envs)

    def _groups(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        obs = {POLICY: x.unsqueeze(-1).clone()}
        if self.privileged:
            obs[CRITIC] = torch.stack([x, -x], dim=-1)
        return obs

    def reset(self):
        self.t = 0
        self.x = torch.arange(1, self.num_envs + 1, dtype=torch.float32)
        return self._groups(self.x)

    def step(self, actions):
        n = self.num_envs
        terminated = torch.zeros(n, dtype=torch.bool)
        truncated = torch.zeros(n, dtype=torch.bool)
        x_next = self.x + 1
        for (t, env), (term, trunc) in self.ends.items():
            if t == self.t:
                terminated[env], truncated[env] = term, trunc
                x_next[env] = 100 + 10 * env + t
        ended = torch.nonzero(terminated | truncated).flatten()
        before_reset = self._groups(x_next)
        final_obs = {k: v[ended] for k, v in before_reset.items()}
        x_next[ended] = 50 + ended.float()
        self.x, self.t = x_next, self.t + 1
        if self.dense:
            return StepResult(self._groups(x_next), torch.ones(n), terminated, truncated, None, None, {},
                              final_obs_all=before_reset)
        return StepResult(self._groups(x_next), torch.ones(n), terminated, truncated, final_obs, ended, {})
