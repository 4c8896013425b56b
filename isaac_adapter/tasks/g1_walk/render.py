"""Watch a policy: MuJoCo offscreen rendering of one env of a MuJoCo-backed G1 walk env, or a replay
of states recorded in another simulator, from a camera that follows the pelvis.

Rendering needs an OpenGL backend chosen before ``mujoco`` is imported: ``MUJOCO_GL=egl`` on a
headless machine (``examples/g1_walk.py --play`` sets it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import mujoco
import numpy as np
import torch

from ppo_bootstrap.env import ObsGroups

from isaac_adapter.backends.layout import robot_layout
from isaac_adapter.tasks.g1_walk import assets
from isaac_adapter.tasks.g1_walk.env import G1WalkEnv


def render_rollout(
    env: G1WalkEnv,
    act: Callable[[ObsGroups], torch.Tensor],
    seconds: float,
    width: int = 480,
    height: int = 320,
    fps: int = 25,
    env_id: int = 0,
) -> tuple[list[np.ndarray], float]:
    """Step ``env`` with ``act`` for ``seconds`` and render ``env_id`` about ``fps`` times a second.

    Returns frames ``[H, W, 3]`` uint8 and the simulated time between frames (a whole number of
    policy steps). A frame shows the state the policy acts on next (after a fall, the respawn).
    """
    every = max(1, round(1.0 / (fps * env.dt)))

    def states() -> Iterator[torch.Tensor]:
        obs = env.current_observations()
        for k in range(round(seconds / env.dt)):
            obs = env.step(act(obs)).obs
            if k % every == 0:
                s = env.state
                yield torch.cat([s.root_pos_w[env_id], s.root_quat_w[env_id], s.joint_pos[env_id]])

    return render_states(env.backend.model, states(), width, height), every * env.dt


def replay(
    qpos: torch.Tensor, dt: float, model_variant: str, width: int = 480, height: int = 320, fps: int = 25
) -> tuple[list[np.ndarray], float]:
    """Render recorded states, e.g. an Isaac Lab rollout of the same robot: ``qpos`` ``[T, 7 + J]``
    (root position, quaternion ``(w, x, y, z)``, joints in actuator order), one row per policy step
    of ``dt`` s. Returns frames and the time between them, as :func:`render_rollout`."""
    every = max(1, round(1.0 / (fps * dt)))
    model = assets.build_g1_model(model_variant, sim_dt=0.005).model
    return render_states(model, qpos[::every], width, height), every * dt


def render_states(
    model: mujoco.MjModel, states: Iterable[torch.Tensor], width: int = 480, height: int = 320
) -> list[np.ndarray]:
    """One frame ``[H, W, 3]`` uint8 per state ``[7 + J]`` (root position, quaternion ``(w, x, y, z)``,
    joints in actuator order), from a camera that follows the pelvis."""
    data = mujoco.MjData(model)
    layout = robot_layout(model, assets.ROOT_BODY, assets.FEET, assets.FOOT_CONTACT_SENSORS, assets.FOOT_VEL_SENSORS)
    camera = mujoco.MjvCamera()
    camera.type = mujoco.mjtCamera.mjCAMERA_TRACKING
    camera.trackbodyid = layout.root_body
    camera.distance, camera.elevation, camera.azimuth = 3.0, -15.0, 135.0
    frames = []
    with mujoco.Renderer(model, height, width) as renderer:
        for state in states:
            q = state.cpu().numpy()
            data.qpos[layout.root_q : layout.root_q + 7] = q[:7]
            data.qpos[layout.joint_q] = q[7:]
            mujoco.mj_forward(model, data)
            renderer.update_scene(data, camera)
            frames.append(renderer.render().copy())
    return frames


def save_gif(frames: list[np.ndarray], path: str | Path, frame_s: float) -> None:
    """Write ``frames`` as a looping GIF (Pillow) played in real time, atomically."""
    from PIL import Image

    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    images = [Image.fromarray(f) for f in frames]
    images[0].save(tmp, format="GIF", save_all=True, append_images=images[1:], duration=round(1000 * frame_s), loop=0)
    tmp.replace(path)
