"""MjlabVecEnv against a fake env that follows mjlab's ``auto_reset=False`` contract."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from ppo_bootstrap import PolicyConfig, PPOConfig, Runner, RunnerConfig
from ppo_bootstrap.episode import validate_step

from isaac_adapter.adapters.mjlab import MjlabVecEnv, disable_auto_reset


class FakeMjlabEnv:
    """mjlab's step without auto-reset: returns the terminal observation of every env and refuses
    to step until ``reset(env_ids=...)`` has reset the ended ones (like ``_manual_reset_pending``).

    Scalar state ``x += 1`` per step; ``falls[t]`` fire the fall term at step ``t``; time-out at
    ``max_episode_length``. ``reset(env_ids)`` sets ``x = -(1 + id)`` and recomputes observations of
    *all* envs with fresh noise (``noise``), as mjlab's reset path does.
    """

    def __init__(self, num_envs=4, max_episode_length=3, falls=None, auto_reset=False, finite_horizon=False, noise=0.5):
        self.cfg = SimpleNamespace(auto_reset=auto_reset, is_finite_horizon=finite_horizon)
        self.num_envs, self.device, self.max_episode_length = num_envs, "cpu", max_episode_length
        self.action_manager = SimpleNamespace(total_action_dim=3)
        self.falls, self.t, self.noise = falls or {}, 0, noise
        self.x = torch.zeros(num_envs)
        self.episode_length_buf = torch.zeros(num_envs, dtype=torch.long)
        self._manual_reset_pending = torch.zeros(num_envs, dtype=torch.bool)
        self.extras = {}
        self.reset_calls = []
        self.obs_buf = {}

    @property
    def unwrapped(self):
        return self

    def _compute(self):
        jitter = self.noise * torch.rand(self.num_envs)  # noise: a recompute differs for every env
        self.obs_buf = {"actor": (self.x + jitter).unsqueeze(-1), "critic": torch.stack([self.x, self.episode_length_buf.float()], -1)}
        return self.obs_buf

    def reset(self, *, seed=None, env_ids=None, options=None):
        if env_ids is None:
            env_ids = torch.arange(self.num_envs)
        self.reset_calls.append(env_ids.tolist())
        self.extras["log"] = {"Episode_Termination/fell": torch.tensor(float(len(env_ids)))}
        self.x[env_ids] = -(1.0 + env_ids.float())
        self.episode_length_buf[env_ids] = 0
        self._manual_reset_pending[env_ids] = False
        return self._compute(), self.extras

    def step(self, action):
        if torch.any(self._manual_reset_pending):
            raise RuntimeError("Environments must be reset via reset(env_ids=...) before calling step() again")
        self.extras["log"] = {}
        self.x += 1.0
        self.episode_length_buf += 1
        terminated = torch.zeros(self.num_envs, dtype=torch.bool)
        terminated[self.falls.get(self.t, [])] = True
        self.t += 1
        time_outs = self.episode_length_buf >= self.max_episode_length
        reset_ids = (terminated | time_outs).nonzero().squeeze(-1)
        obs = self._compute()
        self._manual_reset_pending[reset_ids] = True
        return obs, self.x.clone(), terminated, time_outs, self.extras


def test_terminal_obs_then_reset_only_done_envs():
    env = FakeMjlabEnv(falls={0: [1], 2: [0, 3]})
    venv = MjlabVecEnv(env)
    assert venv.num_actions == 3
    venv.reset()
    for t in range(6):
        x_terminal = env.x + 1.0
        res = venv.step(torch.zeros(4, 3))
        validate_step(4, res)
        ids = res.final_env_ids
        torch.testing.assert_close(res.final_obs["critic"][:, 0], x_terminal[ids])  # the true terminal state
        expected = x_terminal.clone()
        expected[ids] = -(1.0 + ids.float())
        torch.testing.assert_close(res.obs["critic"][:, 0], expected)
        if t == 2:
            assert ids.tolist() == [0, 2, 3]
            assert res.terminated.tolist() == [True, False, False, True]
            assert res.truncated.tolist() == [True, False, True, True]  # both flags kept
            assert res.info["log"]["Episode_Termination/fell"].item() == 3.0
    assert env.reset_calls == [[0, 1, 2, 3], [1], [0, 2, 3], [1], [0, 2, 3]]


def test_non_done_rows_keep_step_obs_not_reset_recompute():
    env = FakeMjlabEnv(falls={0: [1]})
    venv = MjlabVecEnv(env)
    venv.reset()
    captured = {}
    original_step = env.step

    def spy(action):
        out = original_step(action)
        captured["policy"] = out[0]["actor"].clone()
        return out

    env.step = spy
    res = venv.step(torch.zeros(4, 3))
    keep = torch.tensor([True, False, True, True])
    assert torch.equal(res.obs["policy"][keep], captured["policy"][keep])
    assert torch.equal(res.final_obs["policy"], captured["policy"][[1]])


def test_auto_reset_env_is_refused():
    with pytest.raises(ValueError, match="auto_reset"):
        MjlabVecEnv(FakeMjlabEnv(auto_reset=True))
    cfg = SimpleNamespace(auto_reset=True)
    assert disable_auto_reset(cfg).auto_reset is False
    with pytest.raises(ValueError, match="auto_reset"):
        disable_auto_reset(SimpleNamespace())


def test_finite_horizon_timeout_is_terminal():
    env = FakeMjlabEnv(finite_horizon=True)
    venv = MjlabVecEnv(env)
    venv.reset()
    for _ in range(2):
        venv.step(torch.zeros(4, 3))
    res = venv.step(torch.zeros(4, 3))
    assert res.terminated.all() and res.truncated.all()


def test_runner_trains_through_adapter():
    env = FakeMjlabEnv(num_envs=8, max_episode_length=6, falls={t: [t % 8] for t in range(0, 200, 4)})
    cfg = RunnerConfig(num_steps_per_env=8, console=False, policy=PolicyConfig(actor_hidden=(8,), critic_hidden=(8,)),
                       ppo=PPOConfig(num_mini_batches=2, num_learning_epochs=1))
    runner = Runner(MjlabVecEnv(env), cfg)
    runner.learn(3)
    assert runner.iteration == 3 and runner.last_stats["episodes/ended"] > 0
    assert runner.last_stats["env/Episode_Termination/fell"] > 0
