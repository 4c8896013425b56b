"""IsaacLabVecEnv against fake envs that follow Isaac Lab's step order (3.x and 2.x, manager-based and direct)."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import pytest
import torch

from ppo_bootstrap import PolicyConfig, PPOConfig, Runner, RunnerConfig
from ppo_bootstrap.episode import EpisodeProtocolError, EpisodeProtocolWarning, validate_step

from isaac_adapter.adapters.isaaclab import IsaacLabVecEnv, enable_final_obs


class FakeObservationManager:
    def __init__(self, env):
        self.env = env
        self.calls = []

    def compute(self, update_history: bool = False):
        self.calls.append(update_history)
        return self.env._obs()


class FakeIsaacLabEnv:
    """Scalar state ``x`` per env, ``x += 1`` per step; Isaac Lab's ``step`` order:
    dones -> (``extras["final_obs"]`` if ``cfg.compute_final_obs``) -> ``_reset_idx`` -> observations.

    ``falls[t]`` lists the env ids whose fall term fires at step ``t``; the time-out fires at
    ``max_episode_length``. A reset sets ``x = -(1 + env_id)``.
    """

    def __init__(self, num_envs=4, max_episode_length=3, falls=None, version=3, compute_final_obs=True,
                 manager=True, finite_horizon=False, stale=False, alias=False, in_place=False):
        cfg = SimpleNamespace(is_finite_horizon=finite_horizon, observation_noise_model=None)
        if version >= 3:
            cfg.compute_final_obs = compute_final_obs
        self.cfg, self.num_envs, self.device = cfg, num_envs, "cpu"
        self.max_episode_length, self.falls, self.t = max_episode_length, falls or {}, 0
        self.stale, self.alias, self.in_place = stale, alias, in_place
        self.x = torch.zeros(num_envs)
        self.episode_length_buf = torch.zeros(num_envs, dtype=torch.long)
        self.extras = {}
        self.reset_calls = []
        self.reset_terminated = torch.zeros(num_envs, dtype=torch.bool)
        self.reset_time_outs = torch.zeros(num_envs, dtype=torch.bool)
        self.reward_buf = torch.zeros(num_envs)
        self._obs_buf = {"policy": torch.zeros(num_envs, 1), "critic": torch.zeros(num_envs, 2)}
        if manager:
            self.observation_manager = FakeObservationManager(self)
            self.action_manager = SimpleNamespace(total_action_dim=2)
        else:
            self.single_action_space = SimpleNamespace(shape=(2,))

    @property
    def unwrapped(self):
        return self

    def _obs(self):
        if self.alias:  # a direct env returning its own persistent buffers
            self._obs_buf["policy"][:, 0] = self.x
            self._obs_buf["critic"][:] = torch.stack([self.x, self.episode_length_buf.float()], -1)
            return self._obs_buf
        return {"policy": self.x.unsqueeze(-1).clone(),
                "critic": torch.stack([self.x, self.episode_length_buf.float()], -1)}

    def _get_observations(self):  # direct workflow
        return self._obs()

    def _compute_obs(self):
        return self.observation_manager.compute() if hasattr(self, "observation_manager") else self._get_observations()

    def _reset_idx(self, env_ids):
        self.reset_calls.append(torch.as_tensor(env_ids).tolist())
        self.x[env_ids] = -(1.0 + torch.as_tensor(env_ids).float())
        self.episode_length_buf[env_ids] = 0

    def reset(self, seed=None, env_ids=None, options=None):
        self._reset_idx(torch.arange(self.num_envs))
        return self._compute_obs(), self.extras

    def step(self, action):
        self.x += 1.0
        self.episode_length_buf += 1
        fall = torch.zeros(self.num_envs, dtype=torch.bool)
        fall[self.falls.get(self.t, [])] = True
        self.t += 1
        self.reset_terminated[:] = fall
        self.reset_time_outs[:] = self.episode_length_buf >= self.max_episode_length
        self.reward_buf[:] = self.x
        reset_env_ids = (self.reset_terminated | self.reset_time_outs).nonzero().squeeze(-1)
        if len(reset_env_ids) > 0:
            if getattr(self.cfg, "compute_final_obs", False) and not (self.stale and "final_obs" in self.extras):
                fresh = self._compute_obs()
                if self.in_place and "final_obs" in self.extras:  # same dict and tensors, rewritten
                    for key, value in self.extras["final_obs"].items():
                        value.copy_(fresh[key])
                else:
                    self.extras["final_obs"] = fresh
            self._reset_idx(reset_env_ids)
        obs = self._compute_obs()
        return obs, self.reward_buf, self.reset_terminated, self.reset_time_outs, self.extras


class Wrapper:
    """Stands for gym.make's wrappers or Isaac Lab's RslRlVecEnvWrapper: only ``.unwrapped`` matters."""

    def __init__(self, env):
        self.unwrapped = env


def run_steps(venv, env, steps):
    """Step, and for every step check the adapter's output against the fake's own bookkeeping."""
    venv.reset()
    out = []
    for _ in range(steps):
        x_before_reset = env.x + 1.0  # the state every env reaches this step, before any reset
        length = env.episode_length_buf + 1
        res = venv.step(torch.zeros(env.num_envs, 2))
        validate_step(env.num_envs, res)
        ids = res.final_env_ids
        torch.testing.assert_close(res.final_obs["policy"][:, 0], x_before_reset[ids])
        torch.testing.assert_close(res.final_obs["critic"][:, 1], length[ids].float())
        expected_post = x_before_reset.clone()
        expected_post[ids] = -(1.0 + ids.float())
        torch.testing.assert_close(res.obs["policy"][:, 0], expected_post)
        out.append(res)
    return out


@pytest.mark.parametrize("version", [3, 2])
@pytest.mark.parametrize("manager", [True, False])
def test_final_obs_is_pre_reset_and_only_done_envs_reset(version, manager):
    env = FakeIsaacLabEnv(version=version, manager=manager, falls={0: [1], 2: [0, 3], 4: [2]})
    venv = IsaacLabVecEnv(Wrapper(Wrapper(env)))
    assert venv.final_obs_mode == ("extras" if version == 3 else "hook")
    assert venv.num_actions == 2 and venv.unwrapped is env
    results = run_steps(venv, env, 6)
    # step 0: env 1 falls; step 2: envs 0, 3 fall on their time-out step (both flags), env 2 times out
    assert results[0].final_env_ids.tolist() == [1]
    assert results[0].terminated.tolist() == [False, True, False, False]
    assert results[2].final_env_ids.tolist() == [0, 2, 3]
    assert results[2].terminated.tolist() == [True, False, False, True]
    assert results[2].truncated.tolist() == [True, False, True, True]
    assert env.reset_calls[1:] == [[1], [0, 2, 3], [1], [2], [0, 3]]  # only ended envs reset, once each
    if manager and version == 2:
        assert set(env.observation_manager.calls) == {False}  # the terminal read pushes no history


def test_extras_mode_requires_compute_final_obs():
    env = FakeIsaacLabEnv(compute_final_obs=False)
    with pytest.raises(ValueError, match="compute_final_obs"):
        IsaacLabVecEnv(env)
    with pytest.raises(ValueError, match="compute_final_obs"):
        IsaacLabVecEnv(env, final_obs="extras")
    assert IsaacLabVecEnv(env, final_obs="hook").final_obs_mode == "hook"  # the 2.x route works on 3.x too
    cfg = SimpleNamespace(compute_final_obs=False)
    assert enable_final_obs(cfg).compute_final_obs is True
    with pytest.raises(ValueError, match="hook"):
        enable_final_obs(SimpleNamespace())
    with pytest.raises(ValueError, match="hook"):
        IsaacLabVecEnv(FakeIsaacLabEnv(version=2), final_obs="extras")


def test_hook_mode_on_3x_matches_extras_mode():
    falls = {1: [0, 2], 3: [1]}
    a = run_steps(IsaacLabVecEnv(env_a := FakeIsaacLabEnv(falls=falls)), env_a, 5)
    b = run_steps(IsaacLabVecEnv(env_b := FakeIsaacLabEnv(falls=falls, compute_final_obs=False), final_obs="hook"), env_b, 5)
    for ra, rb in zip(a, b):
        assert torch.equal(ra.final_env_ids, rb.final_env_ids)
        for g in ra.final_obs:
            assert torch.equal(ra.final_obs[g], rb.final_obs[g])


def test_stale_final_obs_raises():
    env = FakeIsaacLabEnv(falls={0: [1]}, stale=True)  # writes extras["final_obs"] once, never again
    venv = IsaacLabVecEnv(env)
    venv.reset()
    venv.step(torch.zeros(4, 2))  # env 1 falls: fresh
    venv.step(torch.zeros(4, 2))  # nothing ends: the old value is not read
    with pytest.raises(EpisodeProtocolError, match="stale"):
        venv.step(torch.zeros(4, 2))  # time-outs: extras["final_obs"] is the step-0 object


def test_stale_detected_through_in_place_rewrite_of_same_object():
    env = FakeIsaacLabEnv(falls={0: [1]})
    venv = IsaacLabVecEnv(env)
    venv.reset()
    venv.step(torch.zeros(4, 2))
    kept = env.extras["final_obs"]
    env.cfg.compute_final_obs = False  # the env stops refreshing it; the dict object stays in extras
    with pytest.raises(EpisodeProtocolError, match="stale"):
        for _ in range(3):
            venv.step(torch.zeros(4, 2))
    # a same-object in-place refresh is fresh (version counters moved)
    env2 = FakeIsaacLabEnv(falls={0: [1], 1: [2]}, in_place=True)
    venv2 = IsaacLabVecEnv(env2)
    venv2.reset()
    venv2.step(torch.zeros(4, 2))
    fo = env2.extras["final_obs"]
    res = venv2.step(torch.zeros(4, 2))
    assert env2.extras["final_obs"] is fo and kept is not None
    assert res.final_env_ids.tolist() == [2] and res.final_obs["policy"].tolist() == [[-1.0]]


def test_missing_final_obs_raises():
    env = FakeIsaacLabEnv(falls={0: [2]})
    venv = IsaacLabVecEnv(env)
    venv.reset()
    env.cfg.compute_final_obs = False  # switched off behind the adapter's back
    with pytest.raises(EpisodeProtocolError, match=r"env ids \[2\].*final_obs"):
        venv.step(torch.zeros(4, 2))


def test_final_obs_aliasing_post_reset_obs_raises():
    env = FakeIsaacLabEnv(manager=False, falls={0: [0]}, alias=True)
    venv = IsaacLabVecEnv(env)
    venv.reset()
    with pytest.raises(EpisodeProtocolError, match="shares memory"):
        venv.step(torch.zeros(4, 2))


def test_hook_reports_env_reset_outside_reset_idx():
    env = FakeIsaacLabEnv(version=2, falls={0: [3]})
    venv = IsaacLabVecEnv(env)
    venv.reset()
    original = env.step

    def step_bypassing_hook(action):
        type(env)._reset_idx(env, torch.tensor([3]))  # a reset that the hook cannot see
        env.falls = {}
        env.x[3] = 5.0
        obs, rew, term, trunc, extras = original(action)
        term[3] = True
        return obs, rew, term, trunc, extras

    env.step = step_bypassing_hook
    with pytest.raises(EpisodeProtocolError, match=r"env ids \[3\]"):
        venv.step(torch.zeros(4, 2))


def test_hook_check_names_uncaptured_envs():
    env = FakeIsaacLabEnv(version=2, falls={0: [0]})
    venv = IsaacLabVecEnv(env)
    venv.reset()
    original = env.step

    def step_with_extra_flag(action):
        out = original(action)
        out[2][2] = True  # env 2 claims to have ended but was never reset
        return out

    env.step = step_with_extra_flag
    with pytest.raises(EpisodeProtocolError, match=r"missing for env ids \[2\]"):
        venv.step(torch.zeros(4, 2))
    with pytest.raises(ValueError, match="already adapted"):
        IsaacLabVecEnv(env)


def test_finite_horizon_timeout_is_terminal():
    env = FakeIsaacLabEnv(finite_horizon=True)
    venv = IsaacLabVecEnv(env)
    results = run_steps(venv, env, 3)
    assert results[2].terminated.all() and results[2].truncated.all()


def test_outputs_are_not_env_buffers():
    env = FakeIsaacLabEnv(falls={0: [1]})
    venv = IsaacLabVecEnv(env)
    venv.reset()
    res = venv.step(torch.zeros(4, 2))
    env.step(torch.zeros(4, 2))  # the env rewrites its reward / flag buffers in place
    assert res.terminated.tolist() == [False, True, False, False]
    assert res.reward.tolist() == [0.0, -1.0, -2.0, -3.0]  # x after the step, before resets


class ActionBufferEnv(FakeIsaacLabEnv):
    """Writes the actions into its own buffer in place and then through ``torch.where(..., out=)``,
    as Isaac Lab's action terms do; both fail half-way through a step on a tensor that requires grad."""

    def step(self, action):
        self.raw_actions = getattr(self, "raw_actions", torch.zeros(self.num_envs, 2))
        self.raw_actions[:] = action
        torch.where(self.raw_actions > 0.5, torch.tensor(0.5), self.raw_actions, out=self.raw_actions)
        return super().step(action)


@pytest.mark.parametrize("clip", [None, 0.3])
def test_actions_that_require_grad_reach_the_simulator_detached(clip):
    env = ActionBufferEnv()
    venv = IsaacLabVecEnv(env, clip_actions=clip)
    venv.reset()
    weight = torch.ones(2, requires_grad=True)
    actions = torch.tensor([[0.1, 0.9], [-0.2, 0.4], [1.0, -1.0], [0.0, 0.6]])
    venv.step(actions * weight)
    expected = {None: [[0.1, 0.5], [-0.2, 0.4], [0.5, -1.0], [0.0, 0.5]],  # the env's own cap at 0.5
                0.3: [[0.1, 0.3], [-0.2, 0.3], [0.3, -0.3], [0.0, 0.3]]}[clip]  # the adapter's clamp first
    assert not env.raw_actions.requires_grad
    torch.testing.assert_close(env.raw_actions, torch.tensor(expected))


def test_obs_groups_mapping_and_errors():
    env = FakeIsaacLabEnv()
    venv = IsaacLabVecEnv(env, obs_groups={"policy": "critic"})
    assert set(venv.reset()) == {"policy"} and venv.reset()["policy"].shape == (4, 2)
    with pytest.raises(ValueError, match="does not have"):
        IsaacLabVecEnv(FakeIsaacLabEnv(), obs_groups={"policy": "nope"}).reset()
    with pytest.raises(ValueError, match="final_obs must be"):
        IsaacLabVecEnv(FakeIsaacLabEnv(), final_obs="later")
    with pytest.raises(TypeError, match="not an Isaac Lab RL env"):
        IsaacLabVecEnv(SimpleNamespace())


def test_runner_trains_through_adapter(tmp_path):
    env = FakeIsaacLabEnv(num_envs=8, max_episode_length=5, falls={t: [t % 8] for t in range(0, 200, 3)})
    cfg = RunnerConfig(num_steps_per_env=8, console=False, policy=PolicyConfig(actor_hidden=(8,), critic_hidden=(8,)),
                       ppo=PPOConfig(num_mini_batches=2, num_learning_epochs=1))
    venv = IsaacLabVecEnv(env)
    assert venv.max_episode_length == 5  # the simulator's declared time limit, which the Runner watches
    runner = Runner(venv, cfg)
    with warnings.catch_warnings():
        warnings.simplefilter("error", EpisodeProtocolWarning)  # time-outs come on the limit, as truncated
        runner.learn(3)
    assert runner.iteration == 3
    assert runner.last_stats["episodes/ended"] > 0
