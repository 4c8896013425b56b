"""Isaac Lab's own ``Isaac-Velocity-Flat-G1`` on the locally built G1 USD, through ``IsaacLabVecEnv``.

Run through ``scripts/isaaclab_tier.sh``, which builds the asset root and sets ``ISAACSIM_ASSET_ROOT``.
Kit-less, Newton / MuJoCo-Warp on CPU, 8 envs, 1 s episodes so that time-outs happen.

The final observation of every ended env is checked against an independent read of the robot's
joint positions taken right before Isaac Lab resets it (policy columns 12:41 are
``joint_pos - default_joint_pos``, with the task's +-0.01 observation noise).
"""

from __future__ import annotations

import pytest
import torch

from ppo_bootstrap import PolicyConfig, PPOConfig, Runner, RunnerConfig
from ppo_bootstrap.episode import validate_step

from isaac_adapter.isaaclab.velocity import make_velocity_g1_env

NUM_ENVS = 8
JOINT_POS_COLUMNS = slice(12, 41)  # base lin vel, ang vel, gravity, command (3 + 3 + 3 + 3), then 29 joints
OBS_NOISE = 0.01


def _torch(x):
    return x.torch if hasattr(x, "torch") else torch.as_tensor(x)


@pytest.fixture(scope="module")
def env():
    venv = make_velocity_g1_env(num_envs=NUM_ENVS, device="cpu", episode_length_s=1.0)
    yield venv
    venv.close()


def test_shapes_and_groups(env):
    obs = env.reset()
    assert set(obs) == {"policy"}
    assert obs["policy"].shape == (NUM_ENVS, 99)
    assert env.num_actions == 29
    assert env.final_obs_mode == "extras"


def test_final_obs_is_the_pre_reset_state_and_resets_are_selective(env):
    base = env.unwrapped
    robot = base.scene["robot"]
    snapshot = {}
    original = base._reset_idx

    def spy(env_ids, *args, **kwargs):
        snapshot["joint_pos_rel"] = (_torch(robot.data.joint_pos) - _torch(robot.data.default_joint_pos)).clone()
        snapshot["root_pos"] = _torch(robot.data.root_pos_w).clone()
        return original(env_ids, *args, **kwargs)

    base._reset_idx = spy
    try:
        env.reset()
        gen = torch.Generator().manual_seed(0)
        checked, timeouts, falls = 0, 0, 0
        steps_per_episode = base.max_episode_length
        for _ in range(2 * steps_per_episode + 5):
            before = _torch(robot.data.root_pos_w).clone()
            res = env.step(0.5 * torch.randn(NUM_ENVS, env.num_actions, generator=gen))
            validate_step(NUM_ENVS, res)
            ids = res.final_env_ids
            if ids.numel() == 0:
                continue
            err = (res.final_obs["policy"][:, JOINT_POS_COLUMNS] - snapshot["joint_pos_rel"][ids]).abs().max()
            assert err <= OBS_NOISE + 1e-4, f"final obs differs from the pre-reset state by {err}"
            assert (res.final_obs["policy"] - res.obs["policy"][ids]).abs().amax(-1).min() > 0.1
            # envs that did not end keep running: their root moved continuously, no respawn
            running = torch.ones(NUM_ENVS, dtype=torch.bool)
            running[ids] = False
            jump = (_torch(robot.data.root_pos_w)[running] - before[running]).norm(dim=-1)
            assert (jump < 0.2).all()
            checked += ids.numel()
            timeouts += int(res.truncated.sum())
            falls += int((res.terminated & ~res.truncated).sum())
    finally:
        base._reset_idx = original
    assert checked > 0 and timeouts > 0, (checked, timeouts, falls)


def test_runner_trains_a_few_iterations(env, tmp_path):
    cfg = RunnerConfig(
        num_steps_per_env=8, log_dir=str(tmp_path), console=False, save_interval=0,
        ppo=PPOConfig(num_mini_batches=2, num_learning_epochs=1),
        policy=PolicyConfig(actor_hidden=(32,), critic_hidden=(32,)),
    )
    runner = Runner(env, cfg)
    runner.learn(2)
    assert runner.iteration == 2
    assert (tmp_path / "model_2.pt").is_file()
    assert all(torch.isfinite(p).all() for p in runner.policy.parameters())


def test_rough_task_builds_and_steps_through_the_adapter(env):
    """The rough task (generated terrain, height scan from the torso) builds after the flat one is closed."""
    env.close()
    rough = make_velocity_g1_env("Isaac-Velocity-Rough-G1", num_envs=4, device="cpu", episode_length_s=1.0)
    try:
        obs = rough.reset()
        assert obs["policy"].shape[0] == 4 and obs["policy"].shape[1] > 99  # the height scan comes on top
        gen = torch.Generator().manual_seed(0)
        ended = 0
        for _ in range(60):
            res = rough.step(0.3 * torch.randn(4, rough.num_actions, generator=gen))
            validate_step(4, res)
            ended += res.final_env_ids.numel()
        assert ended > 0  # 1 s episodes: every env ended at least once
    finally:
        rough.close()
