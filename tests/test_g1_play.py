"""Playing a checkpoint: ``examples/g1_walk.py --play`` renders it to a GIF, the library renders with
progress to MP4 or a GIF of bounded size (rendering tests skipped where no headless OpenGL exists)."""

import functools
import json
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECKPOINT = os.path.join(ROOT, "docs", "checkpoints", "g1_clock_it1296.pt")  # trained with --gait-clock


@functools.cache  # one probe per session: every rendering test asks
def _egl_renders() -> bool:
    probe = (
        "import mujoco; m = mujoco.MjModel.from_xml_string('<mujoco><worldbody><geom size=\"1\"/></worldbody></mujoco>');"
        "r = mujoco.Renderer(m, 8, 8); d = mujoco.MjData(m); mujoco.mj_forward(m, d); r.update_scene(d); r.render()"
    )
    env = dict(os.environ, MUJOCO_GL="egl")
    return subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, timeout=120).returncode == 0


# ``examples/g1_walk.py --play`` as a process, its GIF's size and frame count included:
# test_cli.py::test_play_of_the_shipped_checkpoint_needs_no_flags


# Renders 0.3 s of the policy at the default 320x240 and 15 fps (every 3rd 20 ms step: 5 frames) with a
# progress bar, writes it as MP4 (where imageio-ffmpeg is installed) and GIF, and prints what it wrote.
RENDER_SCRIPT = f"""
import json, os, sys, torch
from isaac_adapter.evaluation import ActorCriticPolicy
from isaac_adapter.tasks.g1_walk import G1WalkEnv
from isaac_adapter.tasks.g1_walk.config import walk_config
from isaac_adapter.tasks.g1_walk.render import render_rollout, save_video
env = G1WalkEnv(walk_config(True, num_envs=1, seed=0))
env.reset(seed=0)
obs = env.set_commands(torch.tensor([0.5, 0.0, 0.0]))
policy = ActorCriticPolicy.from_checkpoint({CHECKPOINT!r}, obs, env.num_actions)
frames, frame_s = render_rollout(env, policy, 0.3, progress=True)
out = sys.argv[1]
paths = [os.path.join(out, "play.gif")]
try:
    import imageio_ffmpeg
    paths.append(os.path.join(out, "play.mp4"))
except ImportError:
    pass
for path in paths:
    save_video(frames, path, frame_s)
print(json.dumps({{"frames": len(frames), "shape": list(frames[0].shape), "frame_s": frame_s, "paths": paths}}))
"""


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """``rendered(name)``: this module's script ``name`` (:data:`SCRIPTS`), run as ``python -c SCRIPT FOLDER ROOT``
    with ``MUJOCO_GL=egl`` (read when mujoco is first imported) in a folder of its own: ``(folder, finished
    process)``. The scripts start together when the first is asked for: each is mostly its interpreter's
    start-up, on one core."""
    env = dict(os.environ, MUJOCO_GL="egl")
    started = {}
    for name, script in SCRIPTS.items():
        folder = tmp_path_factory.mktemp(name)
        started[name] = folder, subprocess.Popen([sys.executable, "-c", script, str(folder), ROOT], cwd=ROOT, env=env,
                                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    finished = {}

    def result(name: str) -> tuple:
        if name not in finished:
            folder, proc = started[name]
            out, err = proc.communicate(timeout=300)
            finished[name] = folder, subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
        return finished[name]

    yield result
    for _, proc in started.values():  # those no test asked for
        proc.kill()
        proc.communicate()


@pytest.mark.skipif(not _egl_renders(), reason="no headless OpenGL (EGL) for MuJoCo here")
def test_render_rollout_shows_progress_and_writes_mp4_and_a_small_gif(rendered):
    from PIL import Image

    tmp_path, done = rendered("render")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "render" in done.stderr and "5/5" in done.stderr  # the progress bar, on stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["frames"] == 5 and result["shape"] == [240, 320, 3]
    assert result["frame_s"] == pytest.approx(0.06)

    gif = tmp_path / "play.gif"
    with Image.open(gif) as image:
        assert image.size == (320, 240) and image.n_frames == 5
        assert image.info["duration"] == 60
    # An 8 s clip must stay under 3 MB: 134 frames at this rate, so at most 3 MB * 5 / 134 here (the
    # first frame, stored whole, weighs more in a short clip). Per-frame palettes with dithering took
    # 33 kB a frame (4.4 MB for 8 s); the shared palette 14 kB.
    assert gif.stat().st_size < 3e6 * 5 / 134, gif.stat().st_size

    mp4 = tmp_path / "play.mp4"
    if str(mp4) in result["paths"]:
        import imageio_ffmpeg

        reader = imageio_ffmpeg.read_frames(str(mp4))
        meta = next(reader)
        assert meta["size"] == (320, 240) and meta["fps"] == pytest.approx(1 / 0.06, rel=1e-3)
        assert sum(1 for _ in reader) == 5


def test_save_video_mp4_of_odd_sized_frames_and_its_missing_encoder(tmp_path, monkeypatch):
    from isaac_adapter.tasks.g1_walk.render import save_video, video_format

    frames = [np.full((47, 63, 3), 10 * k, dtype=np.uint8) for k in range(5)]
    save_video(frames, tmp_path / "clip.gif", 0.04)
    assert video_format(tmp_path / "clip.gif") == "gif"
    try:
        import imageio_ffmpeg
    except ImportError:
        imageio_ffmpeg = None
    if imageio_ffmpeg is not None:
        save_video(frames, tmp_path / "clip.mp4", 0.04)
        reader = imageio_ffmpeg.read_frames(str(tmp_path / "clip.mp4"))
        assert next(reader)["size"] == (64, 48)  # padded to the even sides H.264 needs
        assert sum(1 for _ in reader) == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clip.gif"] + (["clip.mp4"] if imageio_ffmpeg else [])

    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)  # as if not installed
    with pytest.raises(ImportError, match=r"pip install imageio-ffmpeg, or use a \.gif path"):
        video_format(tmp_path / "other.MP4")


def _trained(tmp_path):
    from isaac_adapter.app import cli

    runner = cli.main(["--task", "G1-Walk-Clock-v0", "--num_envs", "2", "--num-steps-per-env", "4", "--max_iterations",
                       "1", "--log-dir", str(tmp_path / "run"), "--video_length", "0.2", "--size", "64x48"])
    return runner, cli.parse_args(["--video_length", "0.2", "--size", "64x48"])


def test_training_ends_without_a_clip_of_a_policy_that_does_not_walk(tmp_path, capsys):
    from isaac_adapter.app.train import closing_clip

    runner, args = _trained(tmp_path)
    out = capsys.readouterr().out
    assert "no clip: the policy does not walk yet (to watch it anyway: python examples/g1_walk.py --play " in out
    assert closing_clip(runner, args, tmp_path / "run", accepted=False) == []
    assert not (tmp_path / "run" / "videos").exists()


CLIP_SCRIPT = (
    "import sys; sys.path.insert(0, sys.argv[2]); from pathlib import Path\n"
    "from tests.test_g1_play import _trained\n"
    "from isaac_adapter.app.train import closing_clip\n"
    "runner, args = _trained(Path(sys.argv[1]))\n"
    "print('CLIP', *closing_clip(runner, args, Path(sys.argv[1]) / 'run', accepted=True))\n"
)


@pytest.mark.skipif(not _egl_renders(), reason="no headless OpenGL (EGL) for MuJoCo here")
def test_training_ends_with_a_clip_of_a_policy_that_walks(rendered):
    tmp_path, done = rendered("clip")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    clip = tmp_path / "run" / "videos" / "final.gif"
    assert f"CLIP {clip}" in done.stdout and clip.stat().st_size > 0


def test_play_takes_env_overrides_on_the_recorded_task_and_refuses_agent_ones_in_one_line():
    """``--play CKPT env.KEY=VALUE``: the clip's env is the checkpoint's recorded task with the
    override (pushes every 2-3 s, say, to watch them); an ``agent.`` key has nothing to change there."""
    from isaac_adapter.app import cli, play
    from isaac_adapter.app.overrides import OverrideError
    from isaac_adapter.tasks.registry import checkpoint_walk_config

    path = os.path.join(ROOT, "docs", "checkpoints", "g1_robust_s1_it1300.pt")
    recorded = checkpoint_walk_config(path, randomized=True).randomization
    args = cli.parse_args(["--play", path, "env.randomization.push_interval_s=[2,3]", "env.episode_length_s=7"])
    spec, cfg = play.play_config(path, args)
    assert spec.id == "G1-Walk-Robust-v0" and cfg.episode_length_s == 7.0
    assert cfg.randomization.push_interval_s == (2.0, 3.0) != recorded.push_interval_s
    assert cfg.randomization.push_velocity == recorded.push_velocity and cfg.randomization.friction == recorded.friction
    with pytest.raises(OverrideError, match=r"^override agent\.ppo\.gamma: keys start with env\.$"):
        play.play_config(path, cli.parse_args(["--play", path, "agent.ppo.gamma=0.9"]))


PUSH_SCRIPT = """
import json, sys, torch
from isaac_adapter.tasks.g1_walk import G1WalkEnv
from isaac_adapter.tasks.g1_walk.config import walk_config
from isaac_adapter.tasks.g1_walk.randomization import RandomizationCfg
from isaac_adapter.tasks.g1_walk.render import render_rollout, render_states

def red(frame):
    f = torch.as_tensor(frame).int()
    return int(((f[..., 0] > 150) & (f[..., 1] < 60) & (f[..., 2] < 60)).sum())

env = G1WalkEnv(walk_config(True, num_envs=1))
env.reset(seed=0)
s = env.state
pose = torch.cat([s.root_pos_w[0], s.root_quat_w[0], s.joint_pos[0]])
plain, kicked = render_states(env.backend.model, [pose, torch.cat([pose, torch.tensor([0.5, 0.0, 0.0])])], 160, 120, draft=True)
pushing = walk_config(True, num_envs=1, randomization=RandomizationCfg(push_interval_s=(0.02, 0.02), push_velocity=(0.4, 0.5)))
still = lambda obs: torch.zeros(1, 29)
frames, _ = render_rollout(G1WalkEnv(pushing), still, 0.12, 160, 120, fps=17, draft=True)
quiet, _ = render_rollout(G1WalkEnv(walk_config(True, num_envs=1)), still, 0.12, 160, 120, fps=17, draft=True)
print(json.dumps({"plain": red(plain), "kicked": red(kicked), "rollout": [red(f) for f in frames], "quiet": [red(f) for f in quiet]}))
"""


@pytest.mark.skipif(not _egl_renders(), reason="no headless OpenGL (EGL) for MuJoCo here")
def test_a_push_is_drawn_as_a_red_arrow_into_the_pelvis(rendered):
    """A state carrying a kick renders with a red arrow the same pose without it lacks; a rollout of
    a task that kicks its robot every step shows the arrow in every frame, one without pushes none."""
    _, done = rendered("push")
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["plain"] == 0 and result["kicked"] > 20, result
    assert len(result["rollout"]) == 2 and min(result["rollout"]) > 20, result
    assert result["quiet"] == [0, 0], result


SCRIPTS = {"render": RENDER_SCRIPT, "clip": CLIP_SCRIPT, "push": PUSH_SCRIPT}
