"""A G1 owner's check of an exported policy: ``deploy/deploy_mujoco.py`` runs the shipped clock
checkpoint from its ``policy.onnx`` and ``deploy.yaml`` alone (MuJoCo, numpy, PyYAML, onnxruntime),
and what it builds is the task's.

The script's rollout is recorded (``--record``); at a spread of its steps the recorded MuJoCo state
is written into the project's CPU env, whose own observation must equal the script's (the layout,
scales, frames, clock and last action), whose policy must give the script's ONNX action, and whose
step must land where the script's physics did (rates, PD, solver).
"""

import ast
import importlib.util
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch
import yaml

from ppo_bootstrap import checkpoint

from isaac_adapter.backends.layout import robot_layout
from isaac_adapter.tasks.g1_walk import G1WalkEnv, assets
from isaac_adapter.tasks.g1_walk.deploy import export_deployment
from isaac_adapter.tasks.registry import checkpoint_walk_config

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "deploy" / "deploy_mujoco.py"
CHECKPOINT = ROOT / "docs" / "checkpoints" / "g1_clock_it1296.pt"  # walks under mixed commands on CPU MuJoCo
# 20 s of mixed commands inside the ranges the checkpoint trained on (v_x -0.5..1, v_y and w_z +-0.3 / +-0.5):
# forward, a curve with side-step, standing, fast forward, a right turn, backward, a side-step
COMMANDS = "# t vx vy yaw_rate\n0 0.5 0 0\n3, 0.3, 0.2, 0.3\n6 0 0 0\n8 0.8 0 0\n11 0.2 0 -0.5\n14 -0.4 0 0\n17 0 0.25 0\n"
STEPS = 1000  # 20 s at the policy's 50 Hz
CHECKED_STEPS = np.array([0, 1, 2, 149, 150, 151, 400, 551, 777, 998])  # the start, command changes, late in the clock


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The checkpoint's task config, policy and export folder."""
    out = tmp_path_factory.mktemp("exported")
    cfg = checkpoint_walk_config(str(CHECKPOINT), num_envs=1)
    env = G1WalkEnv(cfg)
    obs = env.reset(seed=0)
    policy = checkpoint.load_policy(str(CHECKPOINT), obs, env.num_actions, torch.device("cpu"))
    paths = export_deployment(policy, obs["policy"].shape[-1], cfg, out, "G1-Walk-Clock-v0")
    (out / "commands.txt").write_text(COMMANDS)
    return cfg, policy, paths


def _deploy(config: Path, *args: str) -> subprocess.CompletedProcess:
    # from another folder, with nothing of the checkout on the path
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, str(SCRIPT), "--config", str(config), "--headless", *args],
                          capture_output=True, text=True, timeout=300, cwd=config.parent, env=env)


@pytest.fixture(scope="module")
def rollout(exported):
    _, _, paths = exported
    record = paths["deploy"].parent / "rollout.npz"
    done = _deploy(paths["deploy"], "--commands", "commands.txt", "--duration", "20", "--record", str(record))
    return done, dict(np.load(record)) if record.is_file() else None


def test_script_imports_nothing_of_the_project():
    imported = set()
    for node in ast.walk(ast.parse(SCRIPT.read_text())):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module.split(".")[0])
    assert imported <= {"__future__", "argparse", "math", "os", "sys", "time", "pathlib", "mujoco", "numpy", "onnxruntime",
                        "yaml"}, imported


def test_deploy_yaml_holds_the_tasks_values(exported):
    cfg, _, paths = exported
    config = yaml.safe_load(paths["deploy"].read_text())
    assert config["policy_path"] == "policy.onnx" and (paths["deploy"].parent / "policy.onnx").is_file()
    assert Path(config["xml_path"]).name == "scene_mjx.xml" and Path(config["xml_path"]).is_file()
    assert (config["simulation_dt"], config["control_decimation"], config["gait_period_s"]) == (0.005, 4, 0.8)
    assert (config["integrator"], config["solver"], config["solver_iterations"], config["ls_iterations"]) == (
        "implicitfast", "newton", 5, 8)
    assert (config["action_scale"], config["action_clip"], config["fall_height"]) == (0.25, 10.0, 0.25)
    assert [(t["name"], t["width"], t["scale"]) for t in config["obs_terms"]] == [
        ("base_ang_vel", 3, 0.25), ("projected_gravity", 3, 1.0), ("velocity_command", 3, 1.0),
        ("joint_pos_rel", 29, 1.0), ("joint_vel", 29, 0.05), ("last_action", 29, 1.0), ("gait_clock", 2, 1.0)]
    assert config["num_obs"] == 98 and config["num_actions"] == 29
    # the menagerie MJX G1's servos: kp 75 (ankles and wrists 20), kv 2; its joints' actuator force ranges
    names = config["joint_names"]
    assert names[:6] == ["left_hip_pitch_joint", "left_hip_roll_joint", "left_hip_yaw_joint", "left_knee_joint",
                         "left_ankle_pitch_joint", "left_ankle_roll_joint"]
    assert config["kps"] == [20.0 if ("ankle" in n or "wrist" in n) else 75.0 for n in names]
    assert config["kds"] == [2.0] * 29
    limit = {"hip_pitch": 88, "hip_roll": 139, "hip_yaw": 88, "knee": 139, "ankle": 50, "waist_yaw": 88, "waist_roll": 50,
             "waist_pitch": 50, "shoulder": 25, "elbow": 25, "wrist_roll": 25, "wrist_pitch": 5, "wrist_yaw": 5}
    assert config["torque_limits"] == [float(next(v for k, v in limit.items() if k in n)) for n in names]
    # the 'knees_bent' keyframe of the file
    assert config["default_angles"][:6] == [-0.312, 0.0, 0.0, 0.669, -0.363, 0.0]
    assert config["init_root_pos"] == [0.0, 0.0, 0.755] and config["init_root_quat"] == [1.0, 0.0, 0.0, 0.0]
    assert config["command_ranges"] == {"lin_vel_x": list(cfg.lin_vel_x_range), "lin_vel_y": list(cfg.lin_vel_y_range),
                                        "ang_vel_z": list(cfg.ang_vel_z_range)}


def test_the_exported_policy_walks_20_s_of_mixed_commands_without_a_fall(rollout):
    done, record = rollout
    assert done.returncode == 0, done.stdout + done.stderr
    assert "falls 0," in done.stdout and "FALL" not in done.stdout
    assert len(record["obs"]) == STEPS
    assert record["qpos"][:, 2].min() > 0.6  # the base stays up (the evaluation's success height)
    summary = next(line for line in done.stdout.splitlines() if line.startswith("summary:"))
    tracking = float(summary.split("tracking error ")[1].split(" m/s")[0])
    assert tracking < 0.2, summary  # command changes included; the walking gate asks <= 0.15 of a held command
    # the model's servos applied exactly the PD torque of the config's kps, kds and torque limits
    assert float(record["pd_error"]) < 1e-9
    assert sum(line.startswith("t ") for line in done.stdout.splitlines()) == 20  # a status line per second


# trained under domain randomization: on MuJoCo Warp, that one fine-tuned on CPU MuJoCo, one that
# sees its last 3 observation frames (the script stacks them as deploy.yaml says) and that one trained
# on under G1-Walk-Robust-v1's kicks, and two of 3 frames trained on Isaac Lab, the second kicked every
# 2-4 s as the robustness gate kicks; and the MuJoCo Warp one trained on with episodes ended at 0.62 m
ROBUST_CHECKPOINTS = ("g1_robust_s1_it1300.pt", "g1_robust_ft_it2200.pt", "g1_robust_hist3_s1_it1580.pt",
                      "g1_robust_hist3_v1ft_it2454.pt", "g1_robust_isaaclab_hist3_s1_it980.pt",
                      "g1_robust_isaaclab_hist3_push24_s1_it1340.pt", "g1_robust_hist3_v1col_it5100.pt")


@pytest.mark.parametrize("name", ROBUST_CHECKPOINTS)
def test_the_shipped_robust_policy_walks_the_same_commands_through_the_script(tmp_path, name):
    """The randomization-trained policy, exported as its training run would export it, walks the 20 s
    of mixed commands through the standalone script without a fall."""
    path = ROOT / "docs" / "checkpoints" / name
    cfg = checkpoint_walk_config(str(path), num_envs=1, randomized=True)
    assert cfg.randomization.enabled  # what it trained with; the script adds none of it
    env = G1WalkEnv(cfg)
    obs = env.reset(seed=0)
    policy = checkpoint.load_policy(str(path), obs, env.num_actions, torch.device("cpu"))
    paths = export_deployment(policy, obs["policy"].shape[-1], cfg, tmp_path, "G1-Walk-Robust-v0")
    (tmp_path / "commands.txt").write_text(COMMANDS)
    done = _deploy(paths["deploy"], "--commands", "commands.txt", "--duration", "20")
    assert done.returncode == 0, done.stdout + done.stderr
    summary = next(line for line in done.stdout.splitlines() if line.startswith("summary:"))
    assert "falls 0," in summary and "FALL" not in done.stdout, summary
    assert float(summary.split("tracking error ")[1].split(" m/s")[0]) < 0.2, summary


def _task_rows(model: mujoco.MjModel, qpos: np.ndarray, qvel: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """MuJoCo ``qpos`` / ``qvel`` rows as the task's spawn rows ``[K, 7 + J]`` / ``[K, 6 + J]``
    (root angular velocity in the world frame)."""
    layout = robot_layout(model, **assets.backend_names())
    ang_w = np.zeros((len(qpos), 3))
    for row, (q, v) in enumerate(zip(qpos, qvel)):
        mujoco.mju_rotVecQuat(ang_w[row], v[3:6], q[3:7])
    task_q = np.concatenate([qpos[:, :7], qpos[:, layout.joint_q]], axis=1)
    task_v = np.concatenate([qvel[:, :3], ang_w, qvel[:, layout.joint_v]], axis=1)
    return torch.tensor(task_q), torch.tensor(task_v)


@torch.no_grad()
def test_the_scripts_observation_action_and_step_are_the_tasks(exported, rollout):
    cfg, policy, _ = exported
    _, record = rollout
    steps = CHECKED_STEPS
    env = G1WalkEnv(replace(cfg, num_envs=len(steps)))
    env.reset(seed=0)
    # the script's MuJoCo state and task histories at those steps, in the project's env
    qpos, qvel = _task_rows(env.backend.model, record["qpos"][steps], record["qvel"][steps])
    env._write_reset_rows(torch.arange(len(steps)), qpos, qvel)
    env.state = env._read_robot_state()
    env.command[:] = torch.tensor(record["command"][steps])
    previous = np.clip(record["action"][np.maximum(steps - 1, 0)], -cfg.action_clip, cfg.action_clip)
    env.last_action[:] = torch.tensor(np.where(steps[:, None] > 0, previous, 0.0))
    env.episode_length_buf[:] = torch.tensor(record["episode_step"][steps])
    assert record["episode_step"][steps].tolist() == steps.tolist()  # no respawn: step k is the episode's k-th

    obs = env.current_observations()["policy"]
    np.testing.assert_allclose(record["obs"][steps], obs.numpy(), rtol=0, atol=1e-5)
    actions, _ = policy.act_inference(obs)
    np.testing.assert_allclose(record["action"][steps], actions.numpy(), rtol=0, atol=1e-4)

    # one step of the env from there under the script's actions lands on the script's next state; the
    # constraint solver's warm start, which a reset clears, leaves about 1e-5 m and 1e-3 rad (one
    # physics step more or less would move the walking base by about 2e-3 m)
    result = env.step(torch.tensor(record["action"][steps], dtype=torch.float32))
    assert not (result.terminated | result.truncated).any()
    next_q, _ = _task_rows(env.backend.model, record["qpos"][steps + 1], record["qvel"][steps + 1])
    np.testing.assert_allclose(env.state.root_pos_w.numpy(), next_q[:, :3].numpy(), rtol=0, atol=1e-4)
    np.testing.assert_allclose(env.state.joint_pos.numpy(), next_q[:, 7:].numpy(), rtol=0, atol=5e-3)


def test_torque_pd_walks_on_a_short_physics_step_and_falls_on_the_trainings(exported):
    _, _, paths = exported
    short = _deploy(paths["deploy"], "--commands", "commands.txt", "--duration", "10", "--pd", "torque", "--sim-dt", "0.002")
    assert short.returncode == 0, short.stdout + short.stderr
    assert "falls 0," in short.stdout
    # at 5 ms the explicit damping of the wrist roll joints is past Euler's bound (kd dt / inertia 2.5 > 2)
    trained = _deploy(paths["deploy"], "--commands", "commands.txt", "--duration", "3", "--pd", "torque")
    assert trained.returncode == 1, trained.stdout + trained.stderr
    assert "FALL at t" in trained.stdout


@pytest.mark.parametrize("args, message", [
    (["--commands", "missing.txt"], "--commands missing.txt: no such file"),
    (["--commands", "bad.txt"], "bad.txt:2: expected 't vx vy yaw_rate' (4 numbers), got '1 0.5 0'"),
    (["--commands", "late.txt"], "times must start at 0 and increase"),
    (["--sim-dt", "0.003"], "--sim-dt 0.003: the policy step 0.02 s must be a whole number of physics steps"),
    (["--xml", "nowhere.xml"], "model nowhere.xml: no such file; pass the robot's MJCF with --xml"),
])
def test_bad_input_is_one_line(exported, args, message, capsys, monkeypatch):
    _, _, paths = exported
    folder = paths["deploy"].parent
    (folder / "bad.txt").write_text("0 0.5 0 0\n1 0.5 0\n")
    (folder / "late.txt").write_text("1 0.5 0 0\n")
    monkeypatch.chdir(folder)
    # the script's own main, in this process (its rollouts above run it as a program)
    spec = importlib.util.spec_from_file_location("deploy_mujoco", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main(["--config", str(paths["deploy"]), "--headless", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
