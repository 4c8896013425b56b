"""Watch a policy: MuJoCo offscreen rendering of one env of a MuJoCo-backed G1 walk env, or a replay
of states recorded in another simulator, from a camera that follows the pelvis.

Rendering needs an OpenGL backend chosen before ``mujoco`` is imported: ``MUJOCO_GL=egl`` on a
headless machine (``examples/g1_walk.py --play`` sets it). Without a GPU, EGL renders in software at
a few frames a second, so the render functions report progress (:mod:`ppo_bootstrap.progress`).

:func:`save_video` writes MP4 through ``imageio-ffmpeg`` (the ``eval`` extra) or a GIF through Pillow.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sized
from pathlib import Path

import mujoco
import numpy as np
import torch

from ppo_bootstrap.env import ObsGroups
from ppo_bootstrap.episode import done_mask
from ppo_bootstrap.progress import Progress, ProgressReporter

from isaac_adapter.backends.layout import robot_layout
from isaac_adapter.tasks.g1_walk import assets
from isaac_adapter.tasks.g1_walk.env import G1WalkEnv


def render_rollout(
    env: G1WalkEnv,
    act: Callable[[ObsGroups], torch.Tensor],
    seconds: float,
    width: int = 320,
    height: int = 240,
    fps: int = 15,
    env_id: int = 0,
    progress: Progress = None,
    draft: bool = False,
) -> tuple[list[np.ndarray], float]:
    """Step ``env`` with ``act`` for ``seconds`` and render ``env_id`` about ``fps`` times a second.

    Returns frames ``[H, W, 3]`` uint8 and the simulated time between frames (a whole number of
    policy steps). A frame shows the state the policy acts on next (after a fall, the respawn). A
    task that pushes its robots (``randomization.push_interval_s``) gets each kick drawn as a red
    arrow into the pelvis, along the kick, for :data:`PUSH_ARROW_S`.
    ``act.reset(done)`` (``done`` ``[N]`` bool), where ``act`` has it, clears the memory of envs that
    ended, as in evaluation. ``progress`` counts frames (:data:`ppo_bootstrap.progress.Progress`;
    default: a bar when stderr is a terminal). ``draft``: see :func:`render_states`.

    The defaults (320x240, 15 fps: every 3rd 20 ms step) keep an 8 s GIF near 2 MB.
    """
    every = max(1, round(1.0 / (fps * env.dt)))
    steps = round(seconds / env.dt)
    pushes = env.task_cfg.randomization.pushes
    shown = round(PUSH_ARROW_S / env.dt)  # policy steps a kick stays drawn

    def states() -> Iterator[torch.Tensor]:
        obs = env.current_observations()
        kick, age = torch.zeros(3), shown
        for k in range(steps):
            result = env.step(act(obs))
            if hasattr(act, "reset"):
                act.reset(done_mask(result.terminated, result.truncated))
            obs = result.obs
            if pushes:
                last = env.last_push[env_id].cpu()
                if bool((last != 0).any()):
                    kick, age = last, 0
                else:
                    age += 1
            if k % every == 0:
                s = env.state
                state = [s.root_pos_w[env_id], s.root_quat_w[env_id], s.joint_pos[env_id]]
                if pushes:  # the kick as an arrow for PUSH_ARROW_S after it
                    state.append(kick if age < shown else torch.zeros(3))
                yield torch.cat([t.cpu().float() for t in state])

    frames = render_states(env.backend.model, states(), width, height, progress, total=math.ceil(steps / every),
                           draft=draft)
    return frames, every * env.dt


def replay(
    qpos: torch.Tensor, dt: float, model_variant: str, width: int = 320, height: int = 240, fps: int = 15,
    progress: Progress = None,
) -> tuple[list[np.ndarray], float]:
    """Render recorded states, e.g. an Isaac Lab rollout of the same robot: ``qpos`` ``[T, 7 + J]``
    (root position, quaternion ``(w, x, y, z)``, joints in actuator order), one row per policy step
    of ``dt`` s. Returns frames and the time between them, as :func:`render_rollout`."""
    every = max(1, round(1.0 / (fps * dt)))
    model = assets.build_g1_model(model_variant, sim_dt=0.005).model
    return render_states(model, qpos[::every], width, height, progress), every * dt


def render_states(
    model: mujoco.MjModel,
    states: Iterable[torch.Tensor],
    width: int = 320,
    height: int = 240,
    progress: Progress = False,
    total: int | None = None,
    draft: bool = False,
) -> list[np.ndarray]:
    """One frame ``[H, W, 3]`` uint8 per state ``[7 + J]`` (root position, quaternion ``(w, x, y, z)``,
    joints in actuator order), from a camera that follows the pelvis. A state ``[7 + J + 3]`` also
    carries a push, the world-frame velocity kick (m/s) drawn as an arrow ending at the pelvis
    (none where it is zero).

    ``progress`` counts frames out of ``total`` (default: ``len(states)`` where ``states`` has one).
    ``draft``: no shadows, reflections or multisampling, for clips during training: in software
    rendering (EGL without a GPU) the G1 model's 8192-pixel shadow map dominates, and a frame took
    0.10 s instead of 1.86 s on 2 CPU cores, whatever the frame size."""
    data = mujoco.MjData(model)
    layout = robot_layout(model, assets.ROOT_BODY, assets.FEET, assets.FOOT_CONTACT_SENSORS, assets.FOOT_VEL_SENSORS)
    camera = mujoco.MjvCamera()
    camera.type = mujoco.mjtCamera.mjCAMERA_TRACKING
    camera.trackbodyid = layout.root_body
    camera.distance, camera.elevation, camera.azimuth = 3.0, -15.0, 135.0
    frames = []
    if total is None and isinstance(states, Sized):
        total = len(states)
    bar = ProgressReporter(total, "render", progress, unit="frame")
    samples = model.vis.quality.offsamples
    if draft:
        model.vis.quality.offsamples = 0  # read when the renderer's context is made
    with mujoco.Renderer(model, height, width) as renderer, bar:
        model.vis.quality.offsamples = samples
        if draft:
            renderer.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = False
            renderer.scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = False
        joints = len(layout.joint_q)
        for state in states:
            q = state.cpu().numpy()
            data.qpos[layout.root_q : layout.root_q + 7] = q[:7]
            data.qpos[layout.joint_q] = q[7 : 7 + joints]
            mujoco.mj_forward(model, data)
            renderer.update_scene(data, camera)
            kick = q[7 + joints :]
            if kick.size == 3 and np.any(kick != 0):
                _draw_push(renderer.scene, q[:3], kick)
            frames.append(renderer.render().copy())
            bar.update()
    return frames


#: s a kick stays drawn in a rendered rollout, and the arrow's length per m/s of kick
PUSH_ARROW_S = 0.4
PUSH_ARROW_M_PER_MPS = 1.2
PUSH_RGBA = np.array([0.9, 0.1, 0.1, 1.0], dtype=np.float32)


def _draw_push(scene: mujoco.MjvScene, root: np.ndarray, kick: np.ndarray) -> None:
    """Add an arrow to ``scene`` that ends at ``root`` (m, world) and points along ``kick`` (m/s)."""
    if scene.ngeom >= scene.maxgeom:
        return
    end = np.asarray(root, dtype=np.float64)
    start = end - PUSH_ARROW_M_PER_MPS * np.asarray(kick, dtype=np.float64)
    geom = scene.geoms[scene.ngeom]
    mujoco.mjv_initGeom(geom, mujoco.mjtGeom.mjGEOM_ARROW, np.zeros(3), np.zeros(3), np.zeros(9), PUSH_RGBA)
    mujoco.mjv_connector(geom, mujoco.mjtGeom.mjGEOM_ARROW, 0.06, start, end)
    scene.ngeom += 1


def video_format(path: str | Path) -> str:
    """``"mp4"`` for a ``.mp4`` path, else ``"gif"``; check before rendering that it can be written.

    Raises ``ImportError`` (one line: what to install, or to use a ``.gif`` path) for an MP4 without
    ``imageio-ffmpeg``.
    """
    if Path(path).suffix.lower() != ".mp4":
        return "gif"
    try:
        import imageio_ffmpeg  # noqa: F401
    except ImportError:
        message = f"writing {path} needs imageio-ffmpeg: pip install imageio-ffmpeg, or use a .gif path"
        raise ImportError(message) from None
    return "mp4"


def save_video(frames: list[np.ndarray], path: str | Path, frame_s: float) -> None:
    """Write ``frames`` (``[H, W, 3]`` uint8, ``frame_s`` s apart) played in real time, atomically:
    H.264 MP4 when ``path`` ends in ``.mp4`` (``imageio-ffmpeg``), else a looping GIF (Pillow)."""
    if not frames:
        raise ValueError(f"no frames to write to {path}")
    if video_format(path) == "gif":
        save_gif(frames, path, frame_s)
        return
    import imageio_ffmpeg

    path = Path(path)
    tmp = path.with_name(f".{path.stem}.tmp.mp4")  # ffmpeg picks the container from the suffix
    # yuv420p (the format players accept) needs even sides: pad the last row / column
    height, width = frames[0].shape[:2]
    pad = ((0, height % 2), (0, width % 2), (0, 0))
    writer = imageio_ffmpeg.write_frames(str(tmp), (width + width % 2, height + height % 2), fps=1.0 / frame_s,
                                         macro_block_size=2, output_params=["-movflags", "+faststart"])
    try:
        writer.send(None)  # start ffmpeg
        for frame in frames:
            writer.send(np.ascontiguousarray(np.pad(frame, pad, mode="edge")))
        writer.close()
        tmp.replace(path)
    finally:
        writer.close()
        tmp.unlink(missing_ok=True)


def save_gif(frames: list[np.ndarray], path: str | Path, frame_s: float) -> None:
    """Write ``frames`` (``[H, W, 3]`` uint8) as a looping GIF (Pillow) played in real time, atomically.

    One palette for the whole clip, without dithering: a pixel keeps its colour index while the scene
    there is still, so Pillow stores it as transparent in the frame's delta. An 8 s 320x240 clip of
    the shipped policy: 1.9 MB at the render defaults' 16.7 fps, 2.7 MB at 25 fps, where per-frame
    palettes with dithering took 6.7 MB.
    """
    from PIL import Image

    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    # the palette of up to 16 frames spread over the clip, stacked into one image; 255 colours leave
    # Pillow an index for transparency
    sample = Image.fromarray(np.concatenate(frames[:: max(1, len(frames) // 16)], axis=0))
    palette = sample.quantize(255, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE)
    images = [Image.fromarray(f).quantize(palette=palette, dither=Image.Dither.NONE) for f in frames]
    images[0].save(tmp, format="GIF", save_all=True, append_images=images[1:], duration=round(1000 * frame_s), loop=0)
    tmp.replace(path)
