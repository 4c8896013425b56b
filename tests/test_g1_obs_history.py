"""The policy's observation history (``G1WalkConfig.policy_obs_frames``) on MuJoCo CPU: the policy
sees its current frame and the frames it acted on before, newest first, the episode's first frame
standing in for those it has not had; the critic sees the current frame alone; an ended env's
history restarts and the others' go on; the final observation carries the history the episode
ended with; the mirror acts frame by frame; the env's state round-trips; the deployment script
stacks the same frames; a one-frame checkpoint widened to more frames acts as before; bad settings
are one line."""

from __future__ import annotations

import importlib.util
import types
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from ppo_bootstrap.env import CRITIC, POLICY

from isaac_adapter.tasks.g1_walk import terms
from isaac_adapter.tasks.g1_walk.config import G1WalkConfig
from isaac_adapter.tasks.g1_walk.deploy import deploy_config
from isaac_adapter.tasks.g1_walk.env import G1WalkEnv
from isaac_adapter.tasks.g1_walk.randomization import RandomizationCfg

N, FRAMES = 3, 3
SCRIPT = Path(__file__).resolve().parents[1] / "deploy" / "deploy_mujoco.py"


def _cfg(frames: int = FRAMES, **overrides) -> G1WalkConfig:
    # noise on the policy's frames: the history must hold the frames as they were seen
    noise = RandomizationCfg(obs_noise={"ang_vel": 0.2, "joint_pos": 0.05})
    return G1WalkConfig(num_envs=N, seed=3, physics_threads=1, policy_obs_frames=frames, randomization=noise,
                        **overrides)


def _frames(policy: torch.Tensor, width: int) -> list[torch.Tensor]:
    """``[B, k D]`` split into its ``k`` frames ``[B, D]``."""
    return list(policy.split(width, dim=-1))


def _actions(t: int, j: int) -> torch.Tensor:
    return 0.2 * torch.sin(torch.arange(N * j, dtype=torch.float32).view(N, j) + t)


def test_the_policy_sees_the_frames_it_acted_on_newest_first_and_the_critic_the_current_one() -> None:
    env = G1WalkEnv(_cfg())
    width = terms.policy_frame_width(env.num_joints, clock=False)
    obs = env.reset()
    assert obs[POLICY].shape == (N, FRAMES * width)
    single = G1WalkEnv(_cfg(frames=1)).reset()
    assert obs[CRITIC].shape == single[CRITIC].shape  # the critic: one frame and the privileged columns
    seen = [_frames(obs[POLICY], width)[0]]  # the frames the policy acted on, in order
    assert all(torch.equal(f, seen[0]) for f in _frames(obs[POLICY], width))  # a new episode: its first frame throughout
    for t in range(4):
        result = env.step(_actions(t, env.num_actions))
        assert not (result.terminated | result.truncated).any()
        now = _frames(result.obs[POLICY], width)
        past = seen[::-1] + [seen[0]] * FRAMES  # newest first, the first frame repeated where there is none
        for k in range(1, FRAMES):
            assert torch.equal(now[k], past[k - 1]), (t, k)
        # the current frame is the noisy one; the critic's frame is the same state without noise
        clean = env.observations_from(env.state, env.command, env.last_action, env.air_time)
        assert torch.equal(result.obs[CRITIC], clean[CRITIC])
        noise = (now[0] - clean[POLICY]).abs()
        assert noise.max() > 0 and noise[:, :3].max() <= 0.2 * env.cfg.obs_ang_vel_scale + 1e-6
        seen.append(now[0])


def test_an_ended_env_starts_its_history_again_and_its_final_observation_keeps_the_old_one() -> None:
    env = G1WalkEnv(_cfg())
    width = terms.policy_frame_width(env.num_joints, clock=False)
    env.reset()
    for t in range(3):
        last = env.step(_actions(t, env.num_actions)).obs[POLICY]
    env.episode_length_buf[1] = env.max_episode_length - 1  # env 1 alone reaches its time limit next step
    result = env.step(_actions(3, env.num_actions))
    assert result.truncated.tolist() == [False, True, False] and not result.terminated.any()
    before = _frames(last, width)
    now = _frames(result.obs[POLICY], width)
    for k in range(1, FRAMES):  # envs 0 and 2 go on
        assert torch.equal(now[k][[0, 2]], before[k - 1][[0, 2]])
        assert torch.equal(now[k][1], now[0][1])  # env 1: a new episode, its first frame throughout
    ids = torch.tensor([1])
    final_obs = {group: value[ids] for group, value in result.final_obs_all.items()}  # every env's, before the reset
    final = _frames(final_obs[POLICY], width)
    for k in range(1, FRAMES):  # the final observation: the ended episode's own history
        assert torch.equal(final[k][0], before[k - 1][1])
    # recomputed from the terminal snapshot: the same history, the frame without noise
    again = env.terminal_observations(ids)
    assert torch.equal(again[POLICY][:, width:], final_obs[POLICY][:, width:])
    assert torch.equal(again[CRITIC], final_obs[CRITIC])
    assert torch.equal(again[POLICY][:, :width], again[CRITIC][:, :width])


def test_the_mirror_acts_on_each_frame_as_on_the_current_one() -> None:
    env = G1WalkEnv(_cfg())
    frame_mirror = G1WalkEnv(_cfg(frames=1)).symmetry.observations[POLICY]
    width = terms.policy_frame_width(env.num_joints, clock=False)
    x = torch.randn(5, FRAMES * width, generator=torch.Generator().manual_seed(0))
    mirrored = env.symmetry.mirror_group(POLICY, x)
    for k, part in enumerate(x.split(width, dim=-1)):
        torch.testing.assert_close(mirrored[:, k * width:(k + 1) * width], frame_mirror(part), rtol=0, atol=0)
    critic = G1WalkEnv(_cfg(frames=1)).symmetry.observations[CRITIC]
    y = torch.randn(5, critic.size, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(env.symmetry.mirror_group(CRITIC, y), critic(y), rtol=0, atol=0)


@pytest.mark.parametrize("frames", [1, FRAMES])
def test_the_history_is_part_of_the_envs_state(frames: int) -> None:
    # a loaded state goes on bit for bit, the noise included: loading draws nothing from the stream
    env = G1WalkEnv(_cfg(frames))
    env.reset()
    for t in range(2):
        env.step(_actions(t, env.num_actions))
    saved = env.state_dict()
    first = [env.step(_actions(t, env.num_actions)).obs[POLICY] for t in range(2, 4)]
    other = G1WalkEnv(_cfg(frames))
    other.reset()
    other.load_state_dict(saved)
    again = [other.step(_actions(t, env.num_actions)).obs[POLICY] for t in range(2, 4)]
    for a, b in zip(first, again):
        assert torch.equal(a, b)


def test_the_deployment_script_stacks_the_frames_as_the_task_does() -> None:
    spec = importlib.util.spec_from_file_location("deploy_mujoco_history", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    cfg = replace(G1WalkConfig(num_envs=1), policy_obs_frames=FRAMES)
    config = deploy_config(cfg)
    assert config["obs_frames"] == FRAMES and config["num_obs"] == FRAMES * sum(t["width"] for t in config["obs_terms"])
    inputs = []

    class Session:  # a policy that records its input and answers a fixed gait of actions
        def get_inputs(self):
            return [types.SimpleNamespace(name="obs", shape=["batch", config["num_obs"]])]

        def run(self, _, feed):
            inputs.append(feed["obs"][0].copy())
            return [0.2 * np.sin(np.arange(config["num_actions"]) + len(inputs))[None].astype(np.float32)]

    import mujoco

    model = mujoco.MjModel.from_xml_path(config["xml_path"])
    model.opt.timestep = config["simulation_dt"]
    run = script.Deployment(config, model, Session(), "servo")
    for _ in range(5):
        run.step(np.array([0.5, 0.0, 0.0]))
    width = config["num_obs"] // FRAMES
    # the task's own stacking, fed the script's frames in the order it saw them
    history = torch.zeros(1, FRAMES - 1, width)
    started = torch.zeros(1, dtype=torch.bool)
    for obs in inputs:
        frame = torch.from_numpy(obs[:width]).unsqueeze(0)
        np.testing.assert_array_equal(obs, terms.stack_policy_frames(frame, history, started)[0].numpy())
        terms.push_policy_frame(history, started, frame)
    np.testing.assert_array_equal(inputs[3][width:2 * width], inputs[2][:width])  # and by hand: newest first
    np.testing.assert_array_equal(inputs[1][2 * width:], inputs[0][:width])  # the first frame where there is none
    run.reset()  # a respawn starts the history again
    run.step(np.zeros(3))
    np.testing.assert_array_equal(inputs[-1][width:], np.tile(inputs[-1][:width], FRAMES - 1))


@pytest.mark.parametrize("value", [0, -1, 2.0, True, "3"])
def test_a_bad_frame_count_is_one_line(value) -> None:
    with pytest.raises(ValueError, match=r"^policy_obs_frames must be an integer >= 1 \(1: no history\), got"):
        G1WalkConfig(policy_obs_frames=value)


def test_a_widened_checkpoint_acts_as_the_original_on_the_frame_it_saw(tmp_path):
    """``scripts/widen_policy_frames.py``: the shipped one-frame robust policy widened to 3 frames
    gives the original's actions (and values) whatever the two past frames hold, records 3 frames,
    repeats its normalizer statistics per frame, and loads as a 3-frame policy."""
    from ppo_bootstrap import checkpoint

    from isaac_adapter.tasks.g1_walk.widen_frames import widen_policy_frames

    src = Path(__file__).resolve().parents[1] / "docs" / "checkpoints" / "g1_robust_ft_it2200.pt"
    ckpt = checkpoint.read(src)
    checkpoint.save_atomic(widen_policy_frames(ckpt, 3), tmp_path / "k3.pt")
    wide = checkpoint.read(tmp_path / "k3.pt")  # the checksum verifies
    assert wide["task"]["env"]["policy_obs_frames"] == 3 and "ppo" not in wide
    width = ckpt["policy"]["actor.normalizer.mean"].numel()
    critic_width, actions = ckpt["policy"]["critic.normalizer.mean"].numel(), ckpt["policy"]["actor.head.6.bias"].numel()
    assert torch.equal(wide["policy"]["actor.normalizer.m2"], ckpt["policy"]["actor.normalizer.m2"].repeat(3))

    g = torch.Generator().manual_seed(0)
    current, past = torch.randn(5, width, generator=g), 3.0 * torch.randn(5, 2 * width, generator=g)
    critic = torch.randn(5, critic_width, generator=g)
    one = checkpoint.load_policy(src, {POLICY: current, CRITIC: critic}, actions)
    three = checkpoint.load_policy(tmp_path / "k3.pt", {POLICY: torch.cat([current, past], -1), CRITIC: critic}, actions)
    wide_obs = torch.cat([current, past], -1)
    with torch.no_grad():
        # the first layer's sums over a longer row may round in another order (the BLAS kernel picks its
        # blocking by width): equal to float32 rounding, and in float64 to float64's
        torch.testing.assert_close(three.act_inference(wide_obs)[0], one.act_inference(current)[0], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(three.double().act_inference(wide_obs.double())[0],
                                   one.double().act_inference(current.double())[0], rtol=1e-12, atol=1e-12)
        assert torch.equal(three.value(critic.double(), None)[0], one.value(critic.double(), None)[0])
        assert three.act_inference(wide_obs.double())[0].abs().sum() > 0


def test_widening_to_no_more_frames_or_a_foreign_checkpoint_is_one_line(tmp_path):
    from ppo_bootstrap import checkpoint

    from isaac_adapter.tasks.g1_walk.widen_frames import widen_policy_frames

    ckpt = checkpoint.read(Path(__file__).resolve().parents[1] / "docs" / "checkpoints" / "g1_robust_ft_it2200.pt")
    with pytest.raises(ValueError, match=r"^--frames 1: the checkpoint's policy sees 1 frame\(s\) already"):
        widen_policy_frames(ckpt, 1)
    with pytest.raises(ValueError, match="records no G1 task"):
        widen_policy_frames({k: v for k, v in ckpt.items() if k != "task"}, 3)
    recurrent = {**ckpt, "config": {**ckpt["config"], "policy": {**ckpt["config"]["policy"], "recurrent": "gru"}}}
    with pytest.raises(ValueError, match="recurrent"):
        widen_policy_frames(recurrent, 3)
