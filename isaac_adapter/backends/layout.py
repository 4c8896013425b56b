"""Where a floating-base robot's quantities live inside a compiled MuJoCo model (shared by the
CPU and the Warp backend, which read the same model)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import mujoco
import numpy as np


@dataclass(frozen=True)
class RobotLayout:
    """Indices into ``qpos`` / ``qvel`` / ``sensordata`` / bodies. ``J`` actuated joints, ``F`` feet.

    Attributes:
        root_body: body id of the floating base.
        root_q: ``qpos`` address of the free joint (position, then quaternion ``w, x, y, z``).
        root_v: ``qvel`` address of the free joint (linear velocity, world; angular, body frame).
        joint_q: ``[J]`` ``qpos`` addresses of the actuated joints, in actuator order.
        joint_v: ``[J]`` ``qvel`` addresses of the actuated joints.
        foot_bodies: ``[F]`` body ids of the feet.
        contact_adr: ``[F]`` ``sensordata`` address of each foot's contact sensor.
        footvel_adr: ``[F, 3]`` ``sensordata`` addresses of each foot's ``framelinvel`` sensor.
    """

    root_body: int
    root_q: int
    root_v: int
    joint_q: np.ndarray
    joint_v: np.ndarray
    foot_bodies: np.ndarray
    contact_adr: np.ndarray
    footvel_adr: np.ndarray

    @property
    def num_joints(self) -> int:
        return len(self.joint_q)

    @property
    def num_feet(self) -> int:
        return len(self.foot_bodies)


def robot_layout(
    model: mujoco.MjModel,
    root_body: str,
    foot_bodies: Sequence[str],
    foot_contact_sensors: Sequence[str],
    foot_vel_sensors: Sequence[str],
) -> RobotLayout:
    """Resolve names to addresses; the root must carry the only free joint and every actuator drive a joint."""
    root_id = model.body(root_body).id
    free = [j for j in range(model.njnt) if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE]
    if len(free) != 1 or model.jnt_bodyid[free[0]] != root_id:
        raise ValueError(f"expected exactly one free joint, on body {root_body!r}")
    if (model.actuator_trntype != mujoco.mjtTrn.mjTRN_JOINT).any():
        raise ValueError("every actuator must drive a joint")
    joints = model.actuator_trnid[:, 0]
    return RobotLayout(
        root_body=root_id,
        root_q=int(model.jnt_qposadr[free[0]]),
        root_v=int(model.jnt_dofadr[free[0]]),
        joint_q=model.jnt_qposadr[joints].astype(np.int64),
        joint_v=model.jnt_dofadr[joints].astype(np.int64),
        foot_bodies=np.array([model.body(b).id for b in foot_bodies], dtype=np.int64),
        contact_adr=np.array([model.sensor_adr[model.sensor(s).id] for s in foot_contact_sensors], dtype=np.int64),
        footvel_adr=np.array(
            [model.sensor_adr[model.sensor(s).id] + np.arange(3) for s in foot_vel_sensors], dtype=np.int64
        ),
    )
