"""The Isaac Lab path without Isaac Lab: its one-line setup errors, and the MuJoCo replay of a rollout
recorded elsewhere (what the shipped Isaac Lab clip is made with)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from isaac_adapter.isaaclab import robot
from isaac_adapter.isaaclab.robot import G1_USD, IsaacLabSetupError



def test_asset_root_errors_name_the_command_that_builds_it(monkeypatch, tmp_path):
    monkeypatch.delenv("ISAACSIM_ASSET_ROOT", raising=False)
    with pytest.raises(IsaacLabSetupError, match="ISAACSIM_ASSET_ROOT is not set.*python -m isaac_adapter.isaaclab.assets"):
        robot.asset_root()
    monkeypatch.setenv("ISAACSIM_ASSET_ROOT", str(tmp_path))
    with pytest.raises(IsaacLabSetupError, match=f"has no {G1_USD}"):
        robot.asset_root()
    (tmp_path / G1_USD).parent.mkdir(parents=True)
    (tmp_path / G1_USD).write_text("#usda 1.0\n")
    assert robot.asset_root() == tmp_path


@pytest.mark.skipif(sys.version_info[:2] == (3, 12) and __import__("importlib").util.find_spec("isaaclab") is not None,
                    reason="Isaac Lab is installed here")
def test_training_script_stops_before_building_with_one_line(capsys):
    from isaac_adapter.app import cli as g1_walk

    with pytest.raises(SystemExit) as stop:
        g1_walk.main(["--sim", "isaaclab", "--num-envs", "2", "--iterations", "1"])
    message = str(stop.value)
    assert message.startswith("error: ") and "\n" not in message
    assert ("Python 3.12" in message and "scripts/isaaclab_tier.sh" in message) or "pip install" in message


def test_isaac_lab_tasks_need_the_isaac_lab_sim():
    from isaac_adapter.app import cli as g1_walk

    with pytest.raises(SystemExit) as stop:
        g1_walk.main(["--task", "Isaac-Velocity-Flat-G1", "--sim", "mujoco"])
    assert str(stop.value) == "error: Isaac-Velocity-Flat-G1 runs on --sim isaaclab, not mujoco"


def test_task_drives_are_the_mujoco_servos():
    drives = robot.task_drives("menagerie_mjx")
    assert len(drives["stiffness"]) == 29
    # scene_mjx: kp 75 (hips, knees, waist, shoulders, elbows), 20 (ankles, wrists); kv 2 everywhere
    assert drives["stiffness"]["left_knee_joint"] == 75.0 and drives["stiffness"]["left_ankle_pitch_joint"] == 20.0
    assert set(drives["damping"].values()) == {2.0}
    assert drives["joint_effort_limit"]["left_knee_joint"] == 139.0


def test_replay_renders_recorded_states(tmp_path):
    """``g1_walk.py --replay``: states recorded in another simulator, one frame per 1 / fps s."""
    import subprocess

    from PIL import Image

    from test_g1_play import _egl_renders

    if not _egl_renders():
        pytest.skip("no headless OpenGL (EGL) for MuJoCo here")
    from isaac_adapter.tasks.g1_walk.assets import build_g1_model

    nominal = torch.tensor(build_g1_model("menagerie_mjx", 0.005).nominal_qpos, dtype=torch.float32)
    lifted = nominal.clone()
    lifted[2] += 0.3
    qpos = torch.stack([nominal, nominal, lifted, lifted]).unsqueeze(1)  # [T = 4 steps of 0.02 s, 1 env, 36]
    torch.save({"qpos": qpos, "dt": 0.02}, tmp_path / "clip.pt")
    out = tmp_path / "replay.gif"
    cmd = [sys.executable, str(Path(__file__).resolve().parents[1] / "examples" / "g1_walk.py"), "--replay",
           str(tmp_path / "clip.pt"), "--video", str(out), "--size", "64x48", "--fps", "25"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    gif = Image.open(out)
    assert gif.size == (64, 48) and gif.n_frames == 2  # every second step at 25 fps
    assert gif.info["duration"] == 40
    frames = []
    for i in range(2):
        gif.seek(i)
        frames.append(torch.tensor(bytearray(gif.convert("RGB").tobytes())))
    assert not torch.equal(frames[0], frames[1])  # the lifted pelvis shows
