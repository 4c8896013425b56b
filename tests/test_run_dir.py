"""Run folders as Isaac Lab lays them out, --resume's checkpoint search, and the task registry."""

from __future__ import annotations

import re

import pytest
import yaml

from ppo_bootstrap.run_dir import find_checkpoint, new_run_dir, write_git_state, write_params

from isaac_adapter.tasks import registry


def test_run_dir_layout_and_params(tmp_path):
    run = new_run_dir(tmp_path, "g1_walk", "trial")
    assert run.parent == tmp_path / "g1_walk"
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}_\d{2}-\d{2}-\d{2}_trial", run.name)
    env_yaml, agent_yaml = write_params(run, {"num_envs": 64, "ranges": (0.0, 1.0)}, {"ppo": {"gamma": 0.99}})
    assert yaml.safe_load(env_yaml.read_text()) == {"num_envs": 64, "ranges": [0.0, 1.0]}
    assert yaml.safe_load(agent_yaml.read_text()) == {"ppo": {"gamma": 0.99}}
    state = write_git_state(run)  # this checkout is a git repository
    assert state is not None and state.read_text().startswith("commit ")


def test_resume_finds_the_newest_run_and_its_highest_checkpoint(tmp_path):
    base = tmp_path / "g1_walk"
    for run, its in {"2026-11-01_10-00-00": (50, 100), "2026-11-02_09-00-00_a": (50, 200, 1000),
                     "2026-11-03_08-00-00_b": ()}.items():  # the newest run died before its first checkpoint
        (base / run).mkdir(parents=True)
        for it in its:
            (base / run / f"model_{it}.pt").write_bytes(b"")
    assert find_checkpoint(tmp_path, "g1_walk") == base / "2026-11-02_09-00-00_a" / "model_1000.pt"  # not model_200
    assert find_checkpoint(tmp_path, "g1_walk", load_run="2026-11-01.*") == base / "2026-11-01_10-00-00" / "model_100.pt"
    assert find_checkpoint(tmp_path, "g1_walk", checkpoint="model_50.pt").name == "model_50.pt"
    with pytest.raises(FileNotFoundError, match="no checkpoint matching .* in .*g1_walk .runs matching 'nope': none."):
        find_checkpoint(tmp_path, "g1_walk", load_run="nope")


def test_registry_ids_and_one_line_usage_errors():
    assert registry.get_task("G1-Walk-Clock-v0").gait_clock is True
    with pytest.raises(registry.UsageError, match="did you mean G1-Walk-Clock-v0"):
        registry.get_task("G1-Walk-Clock")
    spec = registry.get_task("Isaac-Velocity-Flat-G1")
    with pytest.raises(registry.UsageError, match="runs on --sim isaaclab, not mujoco"):
        registry.resolve(spec, "mujoco", "cpu")
    assert registry.resolve(registry.get_task("G1-Walk-v0"), "auto", "cpu") == ("mujoco", "cpu")
    with pytest.raises(registry.UsageError, match="no CUDA device"):
        registry.resolve(registry.get_task("G1-Walk-v0"), "warp", "cuda")


def test_registry_builds_the_mujoco_task_and_records_its_config():
    spec = registry.get_task("G1-Walk-Clock-v0")
    env = registry.make_env(spec, "mujoco", "cpu", num_envs=2, seed=3)
    params = registry.env_params(env)
    assert params["num_envs"] == 2 and params["seed"] == 3 and params["gait_period_s"] == pytest.approx(0.8)
    assert env.reset()["policy"].shape == (2, 98)
