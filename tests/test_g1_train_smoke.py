"""End-to-end smoke runs: the Runner trains the G1 walk task on real MuJoCo physics, directly and
through ``examples/g1_walk.py``."""

from __future__ import annotations

import math
from pathlib import Path

import torch

from isaac_adapter.tasks.g1_walk import G1WalkConfig, G1WalkEnv  # noqa: E402


def test_g1_walk_trains_checkpoints_and_resumes(tmp_path: Path) -> None:
    from ppo_bootstrap import PolicyConfig, PPOConfig, Runner, RunnerConfig

    def make_runner() -> Runner:
        env = G1WalkEnv(G1WalkConfig(num_envs=16, seed=0))
        cfg = RunnerConfig(
            num_steps_per_env=32,
            save_interval=1,
            log_dir=str(tmp_path),
            seed=0,
            console=False,
            ppo=PPOConfig(num_learning_epochs=1, num_mini_batches=2),
            policy=PolicyConfig(actor_hidden=(512, 256, 128), critic_hidden=(512, 256, 128)),
        )
        return Runner(env, cfg, device="cpu")

    runner = make_runner()
    runner.learn(2)  # 64 policy steps = 1.28 s; untrained policies fall after about 1.1 s
    stats = runner.last_stats
    assert runner.iteration == 2
    assert all(math.isfinite(v) for v in stats.values())
    assert stats["episodes/ended"] > 0
    # the env's per-cause fall counts reach the Runner's logs
    assert any(key.startswith("env/Episode_Termination/") for key in stats)
    assert (tmp_path / "model_1.pt").exists() and (tmp_path / "model_2.pt").exists()
    assert any(p.name.startswith("events.out.tfevents") for p in tmp_path.iterdir())

    # resume: the next iteration after loading model_2.pt is the one the uninterrupted run takes,
    # bit for bit (physics rows, task buffers and every RNG are in the checkpoint). The
    # uninterrupted run goes first: both runners share this process's global RNG.
    runner.learn(1)
    expected = {k: v.clone() for k, v in runner.policy.state_dict().items()}
    resumed = make_runner()
    resumed.load(tmp_path / "model_2.pt")
    assert resumed.iteration == 2
    resumed.learn(1)
    assert resumed.iteration == 3
    assert torch.equal(resumed.env.episode_step, runner.env.episode_step)
    assert torch.equal(resumed.env.current_observations()["critic"], runner.env.current_observations()["critic"])
    for key, value in expected.items():
        assert torch.equal(resumed.policy.state_dict()[key], value), key
    assert {k: v for k, v in resumed.last_stats.items() if not k.startswith("perf/")} == {
        k: v for k, v in runner.last_stats.items() if not k.startswith("perf/")
    }


def test_example_script_trains_and_writes_a_checkpoint(tmp_path: Path) -> None:
    from isaac_adapter.app.cli import main  # examples/g1_walk.py's
    runner = main(["--num-envs", "8", "--iterations", "1", "--num-steps-per-env", "8", "--log-dir", str(tmp_path)])
    assert runner.iteration == 1 and (tmp_path / "model_1.pt").exists()
    assert runner.env.validate_actions and not torch.backends.cuda.matmul.allow_tf32


def test_example_script_flags_for_speed(tmp_path: Path) -> None:
    """--no-validate also drops the env's finite-action check; --tf32 switches TF32 matmuls on."""
    from isaac_adapter.app.cli import main  # examples/g1_walk.py's
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    try:
        runner = main(["--num-envs", "8", "--iterations", "1", "--num-steps-per-env", "8", "--log-dir", str(tmp_path),
                       "--no-validate", "--tf32"])
        assert not runner.env.validate_actions and not runner.cfg.validate_env_output
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before
