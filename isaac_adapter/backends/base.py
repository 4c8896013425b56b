"""The seam between a task and the physics that advances it.

A backend owns ``num_envs`` copies of one articulated robot and answers in batched torch tensors in
a simulator-neutral convention (Isaac Lab's):

* quaternions are ``(w, x, y, z)``, body to world;
* root linear and angular velocities are in the **world** frame;
* joints are the actuated joints, in actuator order, ``J`` of them.

Tasks only see :class:`PhysicsState`; a CPU MuJoCo backend and a GPU MuJoCo Warp backend plug into
the same seam.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Protocol, runtime_checkable

import torch


@dataclass
class PhysicsState:
    """Batched robot state after the last physics substep. ``N`` envs, ``J`` joints, ``F`` feet.

    Attributes:
        root_pos_w: ``[N, 3]`` root (pelvis) position.
        root_quat_w: ``[N, 4]`` root orientation ``(w, x, y, z)``.
        root_lin_vel_w: ``[N, 3]`` root linear velocity, world frame.
        root_ang_vel_w: ``[N, 3]`` root angular velocity, world frame.
        joint_pos: ``[N, J]`` actuated joint positions.
        joint_vel: ``[N, J]`` actuated joint velocities.
        applied_torque: ``[N, J]`` actuator torques applied in the last substep (after clipping).
        foot_contact: ``[N, F]`` bool, foot touches the ground.
        foot_pos_w: ``[N, F, 3]`` foot body positions.
        foot_lin_vel_w: ``[N, F, 3]`` foot body linear velocities, world frame.
        com_pos_w: ``[N, 3]`` whole-robot centre of mass.
    """

    root_pos_w: torch.Tensor
    root_quat_w: torch.Tensor
    root_lin_vel_w: torch.Tensor
    root_ang_vel_w: torch.Tensor
    joint_pos: torch.Tensor
    joint_vel: torch.Tensor
    applied_torque: torch.Tensor
    foot_contact: torch.Tensor
    foot_pos_w: torch.Tensor
    foot_lin_vel_w: torch.Tensor
    com_pos_w: torch.Tensor

    def index(self, env_ids: torch.Tensor) -> PhysicsState:
        """Rows ``env_ids`` of every field, as copies (a snapshot survives later writes)."""
        return PhysicsState(**{f.name: getattr(self, f.name)[env_ids].clone() for f in fields(self)})

    def as_dict(self) -> dict[str, torch.Tensor]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@runtime_checkable
class PhysicsBackend(Protocol):
    """``num_envs`` copies of one robot, stepped ``decimation`` substeps per policy step."""

    num_envs: int
    num_joints: int
    num_feet: int
    sim_dt: float
    decimation: int
    device: torch.device

    def state(self) -> PhysicsState:
        """Current state of every env. Fresh tensors: they do not change when the backend steps."""
        ...

    def step(self, joint_pos_targets: torch.Tensor) -> None:
        """Hold ``joint_pos_targets`` ``[N, J]`` for ``decimation`` substeps of ``sim_dt``."""
        ...

    def reset_envs(self, env_ids: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """Write a fresh state into ``env_ids`` ``[K]``; every other env is left untouched bit for bit.

        Args:
            env_ids: ``[K]`` long, envs to reset.
            qpos: ``[K, 7 + J]``: root position, root quaternion ``(w, x, y, z)``, joint positions.
            qvel: ``[K, 6 + J]``: root linear and angular velocity (world frame), joint velocities.
        """
        ...

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue bit for bit (integration state of every env)."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None:
        ...
