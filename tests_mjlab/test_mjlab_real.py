"""MjlabVecEnv on mjlab's real ``Mjlab-Velocity-Flat-Unitree-G1`` (MuJoCo Warp on CPU).

Run through ``scripts/mjlab_tier.sh``. The episode is shortened to 0.5 s (25 policy steps) so that
time-outs happen inside the test, and one extra termination term (``fall_at_time_limit``, not a
time-out) fires on the time-out step of even env ids, so that both flags are true there.

The terminal observation the adapter returns is checked against an independent recomputation: the
critic group's ``joint_pos`` term is ``joint_pos - default_joint_pos`` without noise, and the test
reads ``joint_pos`` straight from the robot's data right before the adapter calls ``reset(env_ids)``.
"""

from __future__ import annotations

import time

import pytest
import torch

from ppo_bootstrap import PolicyConfig, PPOConfig, Runner, RunnerConfig
from ppo_bootstrap.episode import validate_step

from isaac_adapter.adapters.mjlab import MjlabVecEnv, disable_auto_reset

TASK = "Mjlab-Velocity-Flat-Unitree-G1"
NUM_ENVS = 16


def fall_at_time_limit(env):
    """A non-time-out term that fires with the time-out on even env ids: the both-true case."""
    even = torch.arange(env.num_envs, device=env.device) % 2 == 0
    return (env.episode_length_buf >= env.max_episode_length) & even


@pytest.fixture(scope="module")
def env():
    import mjlab.tasks  # noqa: F401  (registers the tasks)
    from mjlab.envs import ManagerBasedRlEnv
    from mjlab.managers.termination_manager import TerminationTermCfg
    from mjlab.tasks.registry import load_env_cfg

    cfg = load_env_cfg(TASK)
    cfg.scene.num_envs = NUM_ENVS
    cfg.episode_length_s = 0.5
    cfg.terminations["fall_at_time_limit"] = TerminationTermCfg(func=fall_at_time_limit, time_out=False)
    disable_auto_reset(cfg)
    env = ManagerBasedRlEnv(cfg=cfg, device="cpu")
    yield env
    env.close()


def critic_term_slice(env, group: str, term: str) -> slice:
    manager = env.observation_manager
    start = 0
    for name, dims in zip(manager.active_terms[group], manager.group_obs_term_dim[group]):
        size = 1
        for d in dims:
            size *= d
        if name == term:
            return slice(start, start + size)
        start += size
    raise KeyError(term)


def test_terminal_obs_flags_and_partial_reset(env):
    venv = MjlabVecEnv(env)
    assert set(venv.reset()) == {"policy", "critic"}
    robot = env.scene["robot"]
    joints = critic_term_slice(env, "critic", "joint_pos")
    snapshot = {}
    original_reset = env.reset

    def spying_reset(*, seed=None, env_ids=None, options=None):
        snapshot["joint_pos"] = robot.data.joint_pos.clone()
        snapshot["qpos"] = env.sim.data.qpos.torch.clone() if hasattr(env.sim.data.qpos, "torch") else torch.as_tensor(env.sim.data.qpos).clone()
        return original_reset(seed=seed, env_ids=env_ids, options=options)

    env.reset = spying_reset
    seen_trunc = seen_both = seen_fall = 0
    try:
        gen = torch.Generator().manual_seed(0)
        for t in range(2 * env.max_episode_length + 2):
            snapshot.clear()
            actions = 0.5 * torch.randn(NUM_ENVS, venv.num_actions, generator=gen)
            res = venv.step(actions)
            validate_step(NUM_ENVS, res)
            ids = res.final_env_ids
            if ids.numel() == 0:
                assert not snapshot
                continue
            # the final observation is the pre-reset state, recomputed independently
            expected = snapshot["joint_pos"][ids] - robot.data.default_joint_pos[ids]
            torch.testing.assert_close(res.final_obs["critic"][:, joints], expected)
            # only the ended envs were reset: the others keep their state
            qpos = env.sim.data.qpos.torch if hasattr(env.sim.data.qpos, "torch") else torch.as_tensor(env.sim.data.qpos)
            keep = torch.ones(NUM_ENVS, dtype=torch.bool)
            keep[ids] = False
            assert torch.equal(qpos[keep], snapshot["qpos"][keep])
            assert (env.episode_length_buf[ids] == 0).all() and (env.episode_length_buf[keep] > 0).all()
            # the post-reset rows differ from the terminal rows
            assert not torch.allclose(res.obs["critic"][ids], res.final_obs["critic"])
            timed_out = res.truncated & ~res.terminated
            seen_trunc += int(timed_out.sum())
            seen_both += int((res.truncated & res.terminated).sum())
            seen_fall += int((res.terminated & ~res.truncated).sum())
    finally:
        env.reset = original_reset
    assert seen_trunc > 0, "no pure time-out arrived as truncated"
    assert seen_both > 0, "the both-true case never happened"
    print(f"time-outs {seen_trunc}, both {seen_both}, falls {seen_fall}")


def test_runner_trains(env):
    venv = MjlabVecEnv(env)
    cfg = RunnerConfig(
        num_steps_per_env=24,
        console=True,
        policy=PolicyConfig(actor_hidden=(64, 64), critic_hidden=(64, 64)),
        ppo=PPOConfig(num_mini_batches=2, num_learning_epochs=2),
    )
    runner = Runner(venv, cfg)
    t0 = time.perf_counter()
    runner.learn(3)
    print(f"3 iterations of {cfg.num_steps_per_env * NUM_ENVS} steps in {time.perf_counter() - t0:.1f} s")
    assert runner.iteration == 3
    assert runner.last_stats["episodes/ended"] > 0
    assert torch.isfinite(torch.tensor(runner.last_stats["loss/value"]))
