"""``examples/g1_walk.py --play`` renders a checkpoint to a GIF (skipped where no headless OpenGL exists)."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECKPOINT = os.path.join(ROOT, "docs", "checkpoints", "g1_clock_it1296.pt")  # trained with --gait-clock


def _egl_renders() -> bool:
    probe = (
        "import mujoco; m = mujoco.MjModel.from_xml_string('<mujoco><worldbody><geom size=\"1\"/></worldbody></mujoco>');"
        "r = mujoco.Renderer(m, 8, 8); d = mujoco.MjData(m); mujoco.mj_forward(m, d); r.update_scene(d); r.render()"
    )
    env = dict(os.environ, MUJOCO_GL="egl")
    return subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, timeout=120).returncode == 0


@pytest.mark.skipif(not _egl_renders(), reason="no headless OpenGL (EGL) for MuJoCo here")
def test_play_writes_a_gif_of_the_policy(tmp_path):
    from PIL import Image

    out = tmp_path / "play.gif"
    cmd = [sys.executable, os.path.join(ROOT, "examples", "g1_walk.py"), "--play", CHECKPOINT, "--gait-clock",
           "--video", str(out), "--play-seconds", "0.4", "--size", "64x48", "--fps", "25"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    with Image.open(out) as gif:
        assert gif.size == (64, 48)
        assert gif.n_frames == 10  # 0.4 s of 20 ms policy steps, every second one at 25 fps
