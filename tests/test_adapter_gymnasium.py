"""GymnasiumVecEnv against a fake of Gymnasium 1.x ``SyncVectorEnv`` (and the real one when installed)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from ppo_bootstrap import PolicyConfig, PPOConfig, Runner, RunnerConfig
from ppo_bootstrap.episode import EpisodeProtocolError, validate_step

from isaac_adapter.adapters.gymnasium import GymnasiumVecEnv

BOX = SimpleNamespace(shape=(2,), dtype=np.float32)


class FakeSyncVectorEnv:
    """``SyncVectorEnv``'s step/reset semantics for the three autoreset modes, on scalar counters.

    Env ``i`` counts ``x += 1`` per step; ``falls[t]`` terminate at step ``t``; truncation at
    ``max_len`` steps. A reset sets ``x = -(1 + i)``. The observation buffer is reused between calls
    (``copy=False``), so a consumer that keeps a view sees it overwritten.
    """

    def __init__(self, mode, num_envs=4, max_len=3, falls=None, dict_obs=False, honour_reset_mask=True):
        self.metadata = {"autoreset_mode": mode}
        self.num_envs, self.max_len, self.falls, self.t = num_envs, max_len, falls or {}, 0
        self.single_action_space = BOX
        self.dict_obs, self.honour_reset_mask = dict_obs, honour_reset_mask
        self.x = np.zeros(num_envs, dtype=np.float32)
        self.length = np.zeros(num_envs, dtype=np.int64)
        self._autoreset_envs = np.zeros(num_envs, dtype=bool)
        self._buf = np.zeros((num_envs, 1), dtype=np.float32)
        self.filler_rows = 0
        self.actions_seen = []

    @property
    def unwrapped(self):
        return self

    def _single(self, i):
        return {"policy": np.array([self.x[i]], np.float32), "critic": np.array([self.x[i], self.length[i]], np.float32)} \
            if self.dict_obs else np.array([self.x[i]], np.float32)

    def _batched(self):
        if self.dict_obs:
            return {"policy": self.x[:, None].copy(), "critic": np.stack([self.x, self.length.astype(np.float32)], -1)}
        self._buf[:, 0] = self.x
        return self._buf

    def _reset_one(self, i):
        self.x[i], self.length[i] = -(1.0 + i), 0

    def reset(self, *, seed=None, options=None):
        if options is not None and "reset_mask" in options and self.honour_reset_mask:
            mask = options["reset_mask"]
            assert isinstance(mask, np.ndarray) and mask.dtype == np.bool_ and mask.shape == (self.num_envs,)
            for i in np.flatnonzero(mask):
                self._reset_one(i)
            self._autoreset_envs[mask] = False
        else:
            for i in range(self.num_envs):
                self._reset_one(i)
            self._autoreset_envs[:] = False
        return self._batched(), {}

    def step(self, actions):
        assert isinstance(actions, np.ndarray)
        self.actions_seen.append(actions)
        n = self.num_envs
        rew, term, trunc = np.zeros(n, np.float32), np.zeros(n, bool), np.zeros(n, bool)
        infos = {}
        falls = self.falls.get(self.t, [])
        self.t += 1
        for i in range(n):
            if self.metadata["autoreset_mode"] == "NextStep" and self._autoreset_envs[i]:
                self._reset_one(i)  # the filler row: action ignored, reward 0, no flags
                self.filler_rows += 1
                continue
            self.x[i] += 1
            self.length[i] += 1
            rew[i] = self.x[i]
            term[i] = i in falls
            trunc[i] = self.length[i] >= self.max_len
            if self.metadata["autoreset_mode"] == "SameStep" and (term[i] or trunc[i]):
                infos.setdefault("final_obs", np.full(n, None, dtype=object))[i] = self._single(i)
                infos.setdefault("_final_obs", np.zeros(n, bool))[i] = True
                self._reset_one(i)
        self._autoreset_envs = term | trunc
        return self._batched(), rew, term, trunc, infos


def check(venv, env, steps):
    venv.reset()
    out = []
    for _ in range(steps):
        x_terminal = torch.from_numpy(env.x + 1.0)
        res = venv.step(torch.zeros(env.num_envs, 2))
        validate_step(env.num_envs, res)
        ids = res.final_env_ids
        torch.testing.assert_close(res.final_obs["policy"][:, 0], x_terminal[ids])
        expected = x_terminal.clone()
        expected[ids] = -(1.0 + ids.float())
        torch.testing.assert_close(res.obs["policy"][:, 0], expected)
        torch.testing.assert_close(res.reward, x_terminal)  # never a filler reward of 0
        out.append(res)
    return out


@pytest.mark.parametrize("mode", ["NextStep", "SameStep", "Disabled"])
@pytest.mark.parametrize("dict_obs", [False, True])
def test_modes_give_terminal_obs_and_no_filler(mode, dict_obs):
    env = FakeSyncVectorEnv(mode, falls={0: [1], 2: [0, 3]}, dict_obs=dict_obs)
    venv = GymnasiumVecEnv(env)
    results = check(venv, env, 7)
    assert env.filler_rows == 0
    assert results[2].final_env_ids.tolist() == [0, 2, 3]
    assert results[2].terminated.tolist() == [True, False, False, True]
    assert results[2].truncated.tolist() == [True, False, True, True]
    assert set(results[0].obs) == ({"policy", "critic"} if dict_obs else {"policy"})


def test_next_step_env_ignoring_reset_mask_is_caught_before_a_filler():
    env = FakeSyncVectorEnv("NextStep", falls={0: [2]}, honour_reset_mask=False)
    venv = GymnasiumVecEnv(env)
    venv.reset()
    env.reset = lambda **kw: (env._batched(), {})  # a vector env that ignores the partial reset
    with pytest.raises(EpisodeProtocolError, match=r"\[2\].*pending auto-reset"):
        venv.step(torch.zeros(4, 2))


def test_pending_autoreset_before_step_raises():
    env = FakeSyncVectorEnv("NextStep")
    venv = GymnasiumVecEnv(env)
    venv.reset()
    env._autoreset_envs[1] = True  # someone stepped the env behind the adapter's back
    with pytest.raises(EpisodeProtocolError, match="filler"):
        venv.step(torch.zeros(4, 2))


def test_same_step_missing_final_obs_raises():
    env = FakeSyncVectorEnv("SameStep", falls={0: [1]})
    venv = GymnasiumVecEnv(env)
    venv.reset()
    original = env.step

    def no_final(actions):
        obs, rew, term, trunc, infos = original(actions)
        return obs, rew, term, trunc, {}

    env.step = no_final
    with pytest.raises(EpisodeProtocolError, match=r"env ids \[1\].*final_obs"):
        venv.step(torch.zeros(4, 2))


def test_same_step_legacy_key_and_mask_mismatch():
    env = FakeSyncVectorEnv("SameStep", falls={0: [1]})
    venv = GymnasiumVecEnv(env)
    venv.reset()
    original = env.step

    def legacy(actions):
        obs, rew, term, trunc, infos = original(actions)
        return obs, rew, term, trunc, {"final_observation": infos["final_obs"], "_final_observation": infos["_final_obs"]}

    env.step = legacy
    res = venv.step(torch.zeros(4, 2))
    assert res.final_env_ids.tolist() == [1] and res.final_obs["policy"].tolist() == [[-1.0]]

    def wrong_mask(actions):
        obs, rew, term, trunc, infos = original(actions)
        term[0] = True  # env 0 claims an end the infos do not back
        return obs, rew, term, trunc, infos

    env.falls = {1: [1]}
    env.step = wrong_mask
    with pytest.raises(EpisodeProtocolError, match=r"missing for env ids \[0\]"):
        venv.step(torch.zeros(4, 2))


def test_constructor_checks():
    env = FakeSyncVectorEnv("NextStep")
    env.metadata = {}
    with pytest.raises(ValueError, match="autoreset_mode"):
        GymnasiumVecEnv(env)
    assert GymnasiumVecEnv(env, autoreset_mode="NextStep").autoreset_mode == "NextStep"
    with pytest.raises(ValueError, match="unknown autoreset mode"):
        GymnasiumVecEnv(env, autoreset_mode="sometimes")
    env.single_action_space = SimpleNamespace(shape=(), dtype=np.int64)  # Discrete
    with pytest.raises(ValueError, match="float Box"):
        GymnasiumVecEnv(env, autoreset_mode="NextStep")


def test_runner_trains_through_adapter():
    env = FakeSyncVectorEnv("NextStep", num_envs=8, max_len=5, falls={t: [t % 8] for t in range(0, 200, 3)})
    cfg = RunnerConfig(num_steps_per_env=8, console=False, policy=PolicyConfig(actor_hidden=(8,), critic_hidden=(8,)),
                       ppo=PPOConfig(num_mini_batches=2, num_learning_epochs=1))
    runner = Runner(GymnasiumVecEnv(env), cfg)
    runner.learn(2)
    assert runner.iteration == 2 and env.filler_rows == 0


# ---------------------------------------------------------------------- the real Gymnasium, when installed


def _counter_env_cls(gym):
    class Counter(gym.Env):
        """``x += 1`` per step, terminated when the action's first entry is > 0.5, truncated at 3 steps."""

        observation_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)
        action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.x, self.n = -1.0, 0
            return np.array([self.x], np.float32), {}

        def step(self, action):
            self.x += 1.0
            self.n += 1
            return np.array([self.x], np.float32), self.x, bool(action[0] > 0.5), self.n >= 3, {}

    return Counter


@pytest.mark.parametrize("mode", ["NEXT_STEP", "SAME_STEP", "DISABLED"])
def test_real_gymnasium_sync_vector_env(mode):
    gym = pytest.importorskip("gymnasium")
    counter = _counter_env_cls(gym)
    env = gym.vector.SyncVectorEnv([counter] * 3, autoreset_mode=getattr(gym.vector.AutoresetMode, mode), copy=False)
    venv = GymnasiumVecEnv(env)
    obs = venv.reset()
    assert obs["policy"].tolist() == [[-1.0]] * 3
    x = torch.full((3,), -1.0)
    for t in range(8):
        actions = torch.zeros(3, 2)
        actions[t % 3, 0] = 1.0 if t % 2 else 0.0  # some falls, some time-outs, some both
        res = venv.step(actions)
        validate_step(3, res)
        x = x + 1
        ids = res.final_env_ids
        torch.testing.assert_close(res.final_obs["policy"][:, 0], x[ids])
        torch.testing.assert_close(res.reward, x)  # no filler transition: every reward is a real step
        x[ids] = -1.0
        torch.testing.assert_close(res.obs["policy"][:, 0], x)
    env.close()
