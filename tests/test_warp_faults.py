"""Faults of the GPU physics, on Warp's CPU device: a non-finite state ends that env's episode as a
blow-up at the step (cause ``non_finite``, truncated, valued from the observation acted on, reward
zeroed, reset, counted), and a buffer overflow is reported with the step and the rows it needed."""

from __future__ import annotations

import pytest
import torch

from ppo_bootstrap import PolicyConfig, PPOConfig, Runner, RunnerConfig
from ppo_bootstrap.episode import end_blow_ups
from ppo_bootstrap.env import StepResult

from isaac_adapter.tasks.g1_walk import G1WalkEnv
from isaac_adapter.tasks.g1_walk.causes import CAUSE_NAMES, CAUSE_NON_FINITE
from isaac_adapter.tasks.g1_walk.config import gait_clock_config

from test_g1_task_sync import FailOnSyncingOps, toy_env

N = 3


def test_end_blow_ups_values_from_the_acted_on_observation_and_zeroes_the_reward() -> None:
    obs = {"policy": torch.tensor([[1.0], [2.0], [3.0]])}
    final = {"policy": torch.tensor([[10.0], [float("nan")], [30.0]])}
    result = StepResult(obs, torch.tensor([1.0, float("nan"), 3.0]), torch.tensor([False, False, True]),
                        torch.tensor([False, False, False]), None, None, final_obs_all=final)
    acted_on = {"policy": torch.tensor([[-1.0], [-2.0], [-3.0]])}
    with FailOnSyncingOps():  # no host synchronisation on a GPU
        out = end_blow_ups(result, acted_on, torch.tensor([False, True, False]))
    assert out.reward.tolist() == [1.0, 0.0, 3.0]
    assert out.truncated.tolist() == [False, True, False] and out.terminated.tolist() == [False, False, True]
    assert out.final_obs_all["policy"].flatten().tolist() == [10.0, -2.0, 30.0]


def test_a_blown_up_toy_env_trains_on_with_the_blow_up_counted_and_no_nan_in_targets() -> None:
    env = toy_env(4, "cpu")
    gamma = 0.9
    cfg = RunnerConfig(num_steps_per_env=6, console=False, ppo=PPOConfig(gamma=gamma, lam=0.0, normalize_advantage=False),
                       policy=PolicyConfig(actor_hidden=(8,), critic_hidden=(8,), obs_normalization=False))
    runner = Runner(env, cfg)  # non_finite_obs="error": the env itself must hand over nothing non-finite
    physics_step = env.backend.step

    def blowing_step(targets):
        physics_step(targets)
        if env.common_step_counter == 3:  # the rollout's third step leaves env 2 non-finite
            env.backend.qvel[2, 0] = float("nan")

    env.backend.step = blowing_step
    stats = runner._collect()
    runner.alg.compute_returns(runner.obs)
    data = runner.alg.storage.data
    t = 2  # the third step of the rollout
    assert data["truncated"][t, 2] and not data["terminated"][t, 2]
    assert data["rewards"][t, 2].item() == 0.0
    # lam = 0: the target is r + gamma * V(s_t), the value of the observation acted on (stored at t)
    assert data["returns"][t, 2].item() == pytest.approx(gamma * data["values"][t, 2].item(), abs=1e-6)
    assert torch.isfinite(data["returns"]).all() and torch.isfinite(data["obs", "policy"]).all()
    assert stats["env/Episode_Termination/non_finite"] == pytest.approx(1 / cfg.num_steps_per_env)
    assert stats["env/Episode_Termination/time_out_and_fall"] == 0.0


@pytest.fixture(scope="module")
def warp_env():
    pytest.importorskip("mujoco_warp")
    env = G1WalkEnv(gait_clock_config(num_envs=N, seed=1, device="cpu"), backend="warp")
    env.backend.check_every = 0  # the tests read the health check themselves
    env.reset(seed=1)
    return env


def test_non_finite_warp_state_is_reset_at_the_step_with_its_own_cause(warp_env) -> None:
    env = warp_env
    hold = torch.zeros(N, env.num_actions)
    acted_on = env.step(hold).obs
    env.backend._qvel[1, 0] = float("nan")  # env 1's state goes non-finite in the next step
    result = env.step(hold)
    cause = result.info["termination_cause"]
    assert CAUSE_NAMES[int(cause[1])] == "non_finite" and int(cause[1]) == CAUSE_NON_FINITE
    assert result.truncated[1] and not result.terminated[1] and result.reward[1].item() == 0.0
    for group in acted_on:  # never a final observation computed from the non-finite state
        assert torch.equal(result.final_obs_all[group][1], acted_on[group][1])
        assert torch.isfinite(result.obs[group]).all() and torch.isfinite(result.final_obs_all[group]).all()
    assert cause[[0, 2]].tolist() == [0, 0] and torch.isfinite(result.reward).all()
    assert result.info["log"]["Episode_Termination/non_finite"].item() == 1.0
    assert result.info["time_outs"][1]  # info agrees with the flags (no protocol warning)
    assert int(env.episode_length_buf[1]) == 0  # restarted
    env.step(hold)
    assert torch.isfinite(env.backend._qpos).all() and torch.isfinite(env.backend._qvel).all()
    env.backend.check_health()  # the reset cleared it: nothing left to raise


def test_constraint_overflow_names_the_setting_the_step_and_the_rows_needed() -> None:
    pytest.importorskip("mujoco_warp")
    from isaac_adapter.backends.mujoco_warp import SimulationHealthError
    from isaac_adapter.tasks.g1_walk.env import make_warp_backend

    cfg = gait_clock_config(num_envs=N, seed=1, device="cpu")
    backend, nominal, _ = make_warp_backend(cfg, njmax=40, check_every=0)  # a standing G1 needs ~77 rows
    hold = nominal[7:].expand(N, -1)
    backend.step(hold)
    backend.step(hold)
    with pytest.raises(SimulationHealthError) as err:
        backend.check_health()
    message = str(err.value)
    assert "\n" not in message and "NEFC" in message and "first at policy step 1" in message
    assert "needed more than njmax=40 constraint rows" in message
    assert f"raise njmax (env.warp_njmax) to the model's bound {backend.capacity[1]}, its default" in message
    roomy, _, _ = make_warp_backend(cfg, check_every=0)  # the bound it names is enough
    roomy.step(hold)
    roomy.step(hold)
    roomy.check_health()
