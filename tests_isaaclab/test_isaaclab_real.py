"""IsaacLabVecEnv on real Isaac Lab 3.0 envs, kit-less, Newton physics on CPU.

Run through ``scripts/isaaclab_tier.sh``. The robot is the cartpole of ``cartpole_usd.py``, written
with ``pxr`` into a temp dir (Isaac Lab's own USD and ground plane come from a cloud bucket); the
ground plane is dropped. Both workflows are built from Isaac Lab's registered cartpole tasks:

* ``Isaac-Cartpole`` (``ManagerBasedRLEnv``): 0.5 s episodes (time-out term), the cart-out-of-bounds
  fall term narrowed to +-0.4 m, a ``critic`` group, and ``fall_at_time_limit``, a non-time-out term
  that fires on the time-out step of even env ids (the both-true case).
* ``Isaac-Cartpole-Direct`` (``DirectRLEnv``): same episode length, ``max_cart_pos = 0.4``; run once
  through ``compute_final_obs`` and once through the 2.x-style ``_reset_idx`` hook.

The final observation is checked against an independent recomputation from the articulation's joint
state, read by the test right before Isaac Lab resets the ended envs.
"""

from __future__ import annotations

import time

import pytest
import torch

from ppo_bootstrap import PolicyConfig, PPOConfig, Runner, RunnerConfig
from ppo_bootstrap.episode import validate_step

from isaac_adapter.adapters.isaaclab import IsaacLabVecEnv, enable_final_obs

from cartpole_usd import write_cartpole_usd

NUM_ENVS = 16


def fall_at_time_limit(env):
    even = torch.arange(env.num_envs, device=env.device) % 2 == 0
    return (env.episode_length_buf >= env.max_episode_length) & even


def episode_progress(env):
    return (env.episode_length_buf.float() / env.max_episode_length).unsqueeze(-1)


def _torch(x):
    return x.torch if hasattr(x, "torch") else torch.as_tensor(x)


@pytest.fixture(scope="module")
def usd_path(tmp_path_factory):
    return write_cartpole_usd(tmp_path_factory.mktemp("assets") / "cartpole.usda")


def manager_cfg(usd_path, compute_final_obs=True):
    import isaaclab_tasks  # noqa: F401  (registers the tasks)
    from isaaclab.managers import ObservationGroupCfg, ObservationTermCfg, TerminationTermCfg
    from isaaclab.utils import configclass
    from isaaclab_tasks.core.cartpole import mdp
    from isaaclab_tasks.utils import parse_env_cfg

    cfg = parse_env_cfg("Isaac-Cartpole", device="cpu", num_envs=NUM_ENVS)
    cfg.scene.ground = None
    cfg.scene.robot.spawn.usd_path = usd_path
    cfg.episode_length_s = 0.5
    cfg.terminations.cart_out_of_bounds.params["bounds"] = (-0.4, 0.4)
    cfg.terminations.fall_at_time_limit = TerminationTermCfg(func=fall_at_time_limit, time_out=False)

    @configclass
    class CriticCfg(ObservationGroupCfg):
        joint_pos = ObservationTermCfg(func=mdp.joint_pos_rel)
        joint_vel = ObservationTermCfg(func=mdp.joint_vel_rel)
        progress = ObservationTermCfg(func=episode_progress)

    cfg.observations.critic = CriticCfg()
    if compute_final_obs:
        enable_final_obs(cfg)
    return cfg


def direct_cfg(usd_path, compute_final_obs=True):
    import isaaclab_tasks  # noqa: F401
    from isaaclab_tasks.utils import parse_env_cfg

    cfg = parse_env_cfg("Isaac-Cartpole-Direct", device="cpu", num_envs=NUM_ENVS)
    cfg.scene.ground = None
    cfg.scene.cartpole.spawn.usd_path = usd_path
    cfg.episode_length_s = 0.5
    cfg.max_cart_pos = 0.4
    cfg.initial_cart_position_range = (-0.2, 0.2)
    cfg.compute_final_obs = compute_final_obs
    return cfg


def drive(venv, env, robot, expected_obs, steps):
    """Step with random actions; check every ended env against the joint state read before its reset."""
    snapshot = {}
    cls_reset = type(env)._reset_idx
    inner = env.__dict__.get("_reset_idx")  # the adapter's hook, when installed

    def spy(env_ids, *args, **kwargs):
        snapshot["joint_pos"] = _torch(robot.data.joint_pos).clone()
        snapshot["joint_vel"] = _torch(robot.data.joint_vel).clone()
        snapshot["length"] = env.episode_length_buf.clone()
        return (inner or (lambda *a, **k: cls_reset(env, *a, **k)))(env_ids, *args, **kwargs)

    env._reset_idx = spy
    counts = {"timeout": 0, "both": 0, "fall": 0}
    gen = torch.Generator().manual_seed(0)
    try:
        for _ in range(steps):
            snapshot.clear()
            res = venv.step(torch.randn(NUM_ENVS, venv.num_actions, generator=gen))
            validate_step(NUM_ENVS, res)
            ids = res.final_env_ids
            if ids.numel() == 0:
                continue
            expected = expected_obs(snapshot, ids)
            for group, value in expected.items():
                torch.testing.assert_close(res.final_obs[group], value)
            joint_pos = _torch(robot.data.joint_pos)
            keep = torch.ones(NUM_ENVS, dtype=torch.bool)
            keep[ids] = False
            assert torch.equal(joint_pos[keep], snapshot["joint_pos"][keep]), "a reset touched an env that did not end"
            assert (env.episode_length_buf[ids] == 0).all() and (env.episode_length_buf[keep] > 0).all()
            counts["timeout"] += int((res.truncated & ~res.terminated).sum())
            counts["both"] += int((res.truncated & res.terminated).sum())
            counts["fall"] += int((res.terminated & ~res.truncated).sum())
    finally:
        if inner is not None:
            env._reset_idx = inner
        else:
            del env._reset_idx
    return counts


def test_manager_based_env(usd_path):
    from isaaclab.envs import ManagerBasedRLEnv

    env = ManagerBasedRLEnv(cfg=manager_cfg(usd_path))
    try:
        venv = IsaacLabVecEnv(env)
        assert venv.final_obs_mode == "extras"
        obs = venv.reset()
        assert set(obs) == {"policy", "critic"} and obs["critic"].shape == (NUM_ENVS, 5)
        robot = env.scene["robot"]
        default_pos, default_vel = _torch(robot.data.default_joint_pos), _torch(robot.data.default_joint_vel)

        def expected(snap, ids):
            pos = snap["joint_pos"][ids] - default_pos[ids]
            vel = snap["joint_vel"][ids] - default_vel[ids]
            progress = (snap["length"][ids].float() / env.max_episode_length).unsqueeze(-1)
            return {"policy": torch.cat([pos, vel], -1), "critic": torch.cat([pos, vel, progress], -1)}

        counts = drive(venv, env, robot, expected, 2 * env.max_episode_length + 2)
        print("manager-based:", counts)
        assert counts["timeout"] > 0 and counts["both"] > 0 and counts["fall"] > 0

        runner = Runner(venv, RunnerConfig(num_steps_per_env=16, console=True,
                                           policy=PolicyConfig(actor_hidden=(32, 32), critic_hidden=(32, 32)),
                                           ppo=PPOConfig(num_mini_batches=2, num_learning_epochs=2)))
        t0 = time.perf_counter()
        runner.learn(3)
        print(f"3 Runner iterations in {time.perf_counter() - t0:.1f} s")
        assert runner.iteration == 3 and runner.last_stats["episodes/ended"] > 0
    finally:
        env.close()


@pytest.mark.parametrize("final_obs", ["extras", "hook"])
def test_direct_env(usd_path, final_obs):
    from isaaclab_tasks.core.cartpole.cartpole_direct_env import CartpoleEnv

    env = CartpoleEnv(cfg=direct_cfg(usd_path, compute_final_obs=final_obs == "extras"))
    try:
        venv = IsaacLabVecEnv(env, final_obs=final_obs)
        assert venv.final_obs_mode == final_obs
        venv.reset()
        robot = env.cartpole
        cart, pole = env._cart_dof_idx, env._pole_dof_idx
        default_pos, default_vel = _torch(robot.data.default_joint_pos), _torch(robot.data.default_joint_vel)

        def expected(snap, ids):
            pos = snap["joint_pos"][ids] - default_pos[ids]
            vel = snap["joint_vel"][ids] - default_vel[ids]
            return {"policy": torch.cat([pos[:, cart], pos[:, pole], vel[:, cart], vel[:, pole]], -1)}

        counts = drive(venv, env, robot, expected, 2 * env.max_episode_length + 2)
        print(f"direct ({final_obs}):", counts)
        assert counts["timeout"] > 0 and counts["fall"] > 0

        runner = Runner(venv, RunnerConfig(num_steps_per_env=16, console=False,
                                           policy=PolicyConfig(actor_hidden=(32, 32), critic_hidden=(32, 32))))
        runner.learn(2)
        assert runner.iteration == 2
    finally:
        env.close()
