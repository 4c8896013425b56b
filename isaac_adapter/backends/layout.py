"""Where a floating-base robot's quantities live inside a compiled MuJoCo model, and how the seam's
:class:`PhysicsState` is read from and reset rows are written into ``N`` batched simulations.

Shared by the CPU and the Warp backend: both read the same model and keep one row per env, so the
index arithmetic and the frame conversions live here once, on torch views of the backend's arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np
import torch

from isaac_adapter.backends.base import PhysicsState
from isaac_adapter.math import put_rows, quat_apply, quat_apply_inverse


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


def _fresh(x: torch.Tensor) -> torch.Tensor:
    """``x`` as a new float32 tensor: a basic-indexed view must not follow later steps."""
    return x.to(torch.float32, copy=True)


class RobotArrays:
    """One robot's quantities in the ``[N, ...]`` arrays of ``N`` MuJoCo simulations, as torch views.

    The arrays are live (the backend steps them in place) and zero-copy: NumPy rows of a
    ``mujoco.batch.Batch`` (float64, CPU) or Warp arrays (float32, any device). Reads and writes are
    torch ops on the views' device (reset inputs are cast to the views' dtype there), so they add
    no host synchronisation.

    Args:
        layout: where the robot lives in the model.
        qpos: ``[N, nq]`` positions (free joint: position, quaternion ``w, x, y, z``).
        qvel: ``[N, nv]`` velocities (free joint: linear world frame, angular body frame).
        ctrl: ``[N, nu]`` controls (position targets of the actuated joints).
        sensordata: ``[N, nsensordata]`` sensor readings.
        xpos: ``[N, nbody, 3]`` body positions.
        subtree_com: ``[N, nbody, 3]`` subtree centres of mass.
        torque: ``[N, J]`` actuator torques of the last substep, wherever the backend keeps them.
    """

    def __init__(
        self,
        layout: RobotLayout,
        *,
        qpos: torch.Tensor,
        qvel: torch.Tensor,
        ctrl: torch.Tensor,
        sensordata: torch.Tensor,
        xpos: torch.Tensor,
        subtree_com: torch.Tensor,
        torque: torch.Tensor,
    ) -> None:
        self.layout = layout
        self.qpos, self.qvel, self.ctrl, self.torque = qpos, qvel, ctrl, torque
        self.sensordata, self.xpos, self.subtree_com = sensordata, xpos, subtree_com
        # index tensors live on the arrays' device: indexing must not copy indices per call
        dev = qpos.device
        self._joint_q = torch.as_tensor(layout.joint_q, device=dev)
        self._joint_v = torch.as_tensor(layout.joint_v, device=dev)
        self._foot_bodies = torch.as_tensor(layout.foot_bodies, device=dev)
        self._contact_adr = torch.as_tensor(layout.contact_adr, device=dev)
        self._footvel_adr = torch.as_tensor(layout.footvel_adr, device=dev)

    def state(self) -> PhysicsState:
        """Copies of the current state as float32 tensors on the arrays' device (shapes in :class:`PhysicsState`)."""
        q, v = self.qpos, self.qvel
        rq, rv = self.layout.root_q, self.layout.root_v
        quat = _fresh(q[:, rq + 3 : rq + 7])
        # MuJoCo's free-joint angular velocity is in the body frame; the seam speaks world frame
        ang_vel_b = v[:, rv + 3 : rv + 6].to(torch.float32)
        # advanced indexing already copies, so those fields only need the dtype
        return PhysicsState(
            root_pos_w=_fresh(q[:, rq : rq + 3]),
            root_quat_w=quat,
            root_lin_vel_w=_fresh(v[:, rv : rv + 3]),
            root_ang_vel_w=quat_apply(quat, ang_vel_b),
            joint_pos=q[:, self._joint_q].to(torch.float32),
            joint_vel=v[:, self._joint_v].to(torch.float32),
            applied_torque=_fresh(self.torque),
            foot_contact=self.sensordata[:, self._contact_adr] > 0,
            foot_pos_w=self.xpos[:, self._foot_bodies].to(torch.float32),
            foot_lin_vel_w=self.sensordata[:, self._footvel_adr].to(torch.float32),
            com_pos_w=_fresh(self.subtree_com[:, self.layout.root_body]),
        )

    def write_reset_rows(self, env_ids: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """Write a fresh state into rows ``env_ids`` ``[K]`` of ``qpos``/``qvel``/``ctrl``; zero their torques.

        Only the state rows: clearing the rest of the simulation (time, warm start, ...) before and
        recomputing the derived fields after is the backend's job.

        Args:
            env_ids: ``[K]`` long, rows to write.
            qpos: ``[K, 7 + J]``: root position, root quaternion ``(w, x, y, z)`` (normalised
                here), joint positions; the joint positions also become the controls.
            qvel: ``[K, 6 + J]``: root linear and angular velocity (world frame), joint velocities.
        """
        ids = env_ids.to(self.qpos.device, torch.long)
        rows_q, rows_v = self._fresh_rows(self.qpos[ids], self.qvel[ids], qpos, qvel)
        self.qpos[ids] = rows_q
        self.qvel[ids] = rows_v
        self.ctrl[ids] = rows_q[:, self._joint_q].to(self.ctrl.dtype)
        # no torque has been applied to a fresh state yet
        self.torque.index_fill_(0, ids, 0.0)  # a Python value through an index would sync on a GPU

    def write_reset_rows_masked(self, mask: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """:meth:`write_reset_rows` by mask: rows where ``mask`` ``[N]`` (bool) is true get
        ``qpos`` ``[N, 7 + J]`` / ``qvel`` ``[N, 6 + J]``; the other rows of those arguments are not
        read and every other row stays bit-identical. Fixed shapes, no host synchronisation."""
        mask = mask.to(self.qpos.device, torch.bool)
        rows_q, rows_v = self._fresh_rows(self.qpos.clone(), self.qvel.clone(), qpos, qvel)
        put_rows(self.qpos, mask, rows_q)
        put_rows(self.qvel, mask, rows_v)
        put_rows(self.ctrl, mask, rows_q[:, self._joint_q].to(self.ctrl.dtype))
        self.torque.masked_fill_(mask[:, None], 0.0)

    def add_root_velocity_masked(self, mask: torch.Tensor, delta: torch.Tensor) -> None:
        """Add ``delta`` ``[N, 3]`` (m/s, world frame) to the root linear velocity of the rows where
        ``mask`` ``[N]`` is true (a push); every other row stays bit-identical, no host sync."""
        mask = mask.to(self.qvel.device, torch.bool)
        rv = self.layout.root_v
        velocity = self.qvel[:, rv : rv + 3]
        put_rows(velocity, mask, velocity + delta.detach().to(velocity.device, velocity.dtype))

    def _fresh_rows(
        self, rows_q: torch.Tensor, rows_v: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``rows_q`` / ``rows_v`` (copies of full state rows, edited in place) with the spawn pose
        ``qpos`` ``[R, 7 + J]`` and velocity ``qvel`` ``[R, 6 + J]`` written into their fields."""
        qpos = qpos.detach().to(rows_q.device, rows_q.dtype)
        qvel = qvel.detach().to(rows_v.device, rows_v.dtype)
        quat = qpos[:, 3:7] / qpos[:, 3:7].norm(dim=-1, keepdim=True)
        rq, rv = self.layout.root_q, self.layout.root_v
        rows_q[:, rq : rq + 3] = qpos[:, :3]
        rows_q[:, rq + 3 : rq + 7] = quat
        rows_q[:, self._joint_q] = qpos[:, 7:]
        rows_v[:, rv : rv + 3] = qvel[:, :3]
        rows_v[:, rv + 3 : rv + 6] = quat_apply_inverse(quat, qvel[:, 3:6])
        rows_v[:, self._joint_v] = qvel[:, 6:]
        return rows_q, rows_v


def init_backend(
    backend: Any, model: mujoco.MjModel, num_envs: int, decimation: int, device: torch.device, *,
    root_body: str, foot_bodies: Sequence[str], foot_contact_sensors: Sequence[str], foot_vel_sensors: Sequence[str],
) -> RobotLayout:
    """What every MuJoCo backend sets first: ``model``, ``num_envs``, ``decimation``, ``sim_dt``,
    ``device``, ``num_joints`` and ``num_feet`` on ``backend``; returns the robot's layout."""
    if decimation <= 0:
        raise ValueError(f"decimation must be positive, got {decimation}")
    backend.model, backend.num_envs, backend.decimation = model, num_envs, decimation
    backend.sim_dt = float(model.opt.timestep)
    backend.device = device
    layout = robot_layout(model, root_body, foot_bodies, foot_contact_sensors, foot_vel_sensors)
    backend.num_joints, backend.num_feet = layout.num_joints, layout.num_feet
    return layout


#: The model fields each randomized parameter (``tasks.g1_walk.randomization.PHYSICS_PARAMS``) is
#: written into, given the contact model: foot-ground friction lives in the foot-floor ``<pair>``\ s
#: when the model has them, else in the foot geoms.
PARAM_FIELDS = {
    "link_mass_scale": ("body_mass", "body_inertia", "body_subtreemass"),
    "base_com_offset": ("body_ipos",),
    "armature_scale": ("dof_armature",),
    "joint_friction_scale": ("dof_frictionloss",),
    "kp_scale": ("actuator_gainprm", "actuator_biasprm"),
    "kd_scale": ("actuator_biasprm",),
}


class ModelParams:
    """Per-env values of a MuJoCo model's fields from per-env randomized parameters: the arithmetic
    both MuJoCo backends share (the CPU one writes them into its batch's per-simulation fields, the
    Warp one into per-world model arrays).

    Parameters (``[N, ...]`` each, see ``tasks.g1_walk.randomization.draw_physics``): ``friction``
    ``[N]`` sets the sliding friction (both tangential directions) of every foot-floor contact;
    ``link_mass_scale`` ``[N, nbody - 1]`` scales every link's mass and inertia (the subtree masses
    follow); ``base_com_offset`` ``[N, 3]`` moves the root body's centre of mass; ``armature_scale``,
    ``joint_friction_scale`` ``[N, J]`` scale the actuated dofs' armature and friction loss;
    ``kp_scale``, ``kd_scale`` ``[N, J]`` scale each position servo's stiffness (gain and bias) and
    damping (bias). Joints are in actuator order.

    Args:
        model: the compiled model (its values are the nominal ones).
        layout: the robot in it.
    """

    def __init__(self, model: mujoco.MjModel, layout: RobotLayout) -> None:
        self.layout = layout
        self.num_links = model.nbody - 1
        foot = set(layout.foot_bodies.tolist())
        # a geom belongs to a foot when its body is one of the feet (the G1's foot collision geoms)
        on_foot = np.array([int(model.geom_bodyid[g]) in foot for g in range(model.ngeom)])
        static = model.body_weldid[model.geom_bodyid] == 0
        pairs = [i for i in range(model.npair)
                 if (on_foot[model.pair_geom1[i]] and static[model.pair_geom2[i]])
                 or (on_foot[model.pair_geom2[i]] and static[model.pair_geom1[i]])]
        if pairs:
            self.friction_field, rows = "pair_friction", np.array(pairs, dtype=np.int64)
        else:
            colliding = (model.geom_contype | model.geom_conaffinity) > 0
            self.friction_field = "geom_friction"
            rows = np.flatnonzero(on_foot & colliding).astype(np.int64)
        if rows.size == 0:
            raise ValueError("the model has no foot-ground contact to randomize the friction of")
        self.nominal = {name: torch.as_tensor(np.array(getattr(model, name), dtype=np.float64))
                        for name in {*sum(PARAM_FIELDS.values(), ()), self.friction_field}}
        # subtree[b, c] = 1 when body c lies in body b's subtree: subtree masses are one matrix product
        subtree = np.zeros((model.nbody, model.nbody))
        for c in range(model.nbody):
            b = c
            while True:
                subtree[b, c] = 1.0
                if b == 0:
                    break
                b = int(model.body_parentid[b])
        self.subtree = torch.as_tensor(subtree)
        self.actuated_dofs = torch.as_tensor(layout.joint_v)
        self.friction_index = torch.as_tensor(rows)  # the rows of friction_field on a foot

    def to(self, device: str | torch.device) -> "ModelParams":
        """Keep the nominal values and indices on ``device``, where :meth:`values` is called: a CUDA
        graph cannot record a copy from pageable host memory, and each copy would be a host sync."""
        self.nominal = {k: v.to(device) for k, v in self.nominal.items()}
        self.subtree, self.actuated_dofs, self.friction_index = (
            t.to(device) for t in (self.subtree, self.actuated_dofs, self.friction_index))
        return self

    def fields(self, params: Sequence[str]) -> tuple[str, ...]:
        """The model fields that parameters ``params`` write, each once."""
        out: list[str] = []
        for name in params:
            for f in (self.friction_field,) if name == "friction" else PARAM_FIELDS[name]:
                if f not in out:
                    out.append(f)
        return tuple(out)

    def values(self, params: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """``{field: [N, *field shape]}`` float64 on the parameters' device: every field of
        :meth:`fields`, nominal where no parameter changes it."""
        n = next(iter(params.values())).shape[0]
        dev = next(iter(params.values())).device
        nominal = {k: v.to(dev) for k, v in self.nominal.items()}
        out: dict[str, torch.Tensor] = {}

        def field_(name: str) -> torch.Tensor:
            if name not in out:
                out[name] = nominal[name].expand(n, *nominal[name].shape).clone()
            return out[name]

        p = {k: v.to(dev, torch.float64) for k, v in params.items()}
        dofs = self.actuated_dofs.to(dev)
        if "friction" in p:
            field_(self.friction_field)[:, self.friction_index.to(dev), :2] = p["friction"][:, None, None]
        if "link_mass_scale" in p:
            scale = torch.cat([torch.ones(n, 1, dtype=torch.float64, device=dev), p["link_mass_scale"]], dim=1)
            mass = field_("body_mass")
            mass *= scale
            field_("body_inertia").mul_(scale.unsqueeze(-1))
            out["body_subtreemass"] = mass @ self.subtree.to(dev).T
        if "base_com_offset" in p:
            field_("body_ipos")[:, self.layout.root_body] += p["base_com_offset"]
        for name, target in (("armature_scale", "dof_armature"), ("joint_friction_scale", "dof_frictionloss")):
            if name in p:
                field_(target)[:, dofs] *= p[name]
        if "kp_scale" in p:  # a position servo: force = kp (ctrl - q) - kd qdot = gain * ctrl + bias1 q + bias2 qdot
            field_("actuator_gainprm")[:, :, 0] *= p["kp_scale"]
            field_("actuator_biasprm")[:, :, 1] *= p["kp_scale"]
        if "kd_scale" in p:
            field_("actuator_biasprm")[:, :, 2] *= p["kd_scale"]
        return out
