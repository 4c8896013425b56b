"""Left-right mirror of the G1 walk task: its observation groups and actions under ``y -> -y``.

The mirror is the reflection ``M = diag(1, -1, 1)`` through the robot's sagittal (x-z) plane. It
maps the robot onto itself with left and right swapped, so a policy that walks well mirrors its
action when the situation is mirrored (:mod:`ppo_bootstrap.symmetry`). In body-frame terms:

* polar vectors (linear velocity, projected gravity) flip ``y``: ``(x, -y, z)``;
* axial vectors (angular velocity) flip ``x`` and ``z``: ``(-x, y, -z)``, as ``w -> -M w``;
* commands ``(v_x, v_y, w_z)`` -> ``(v_x, -v_y, -w_z)``;
* joints: each ``left_*`` joint trades places with its ``right_*`` partner (a centre joint with
  itself). A hinge about axis ``a`` turned by ``q`` reflects to a turn by ``q`` about ``-M a``, so
  the partner, whose axis is ``b``, turns by ``s q`` with ``s = -(M a) . b = +-1``: ``+1`` for pitch
  axes, ``-1`` for roll and yaw axes. Both pairing and signs come from the MuJoCo model (joint
  names, and axes and anchors at the model's zero pose), which is checked to be mirror-symmetric;
  joint positions relative to the nominal pose, joint velocities, last actions, torques and the
  actions themselves all mirror this way;
* feet trade places (contacts, air times);
* the gait clock: one phase ``p`` is observed as ``(sin 2 pi p, cos 2 pi p)``, and the left leg
  runs at ``p``, the right at ``p + 1/2`` (:func:`.terms.leg_phases`). Swapping the legs is the
  phase ``p + 1/2``, so the clock mirrors to ``(-sin, -cos)``, under which the gait rewards are
  unchanged. The clock restarts with each episode, so a mirrored state sits half a cycle later in
  its episode than the original; the episode's start-up grace windows and time limit, which no
  observation shows, are the only parts of the task the mirror does not carry over.

Observation layouts (:meth:`.task.G1WalkTask.observations_from`, ``J`` joints, ``F`` feet):
``policy = [w_b (3), g_b (3), command (3), q - q_nom (J), qd (J), last action (J), clock (2, if on)]``;
``critic = [policy, v_b (3), root height (1), foot contact (F), air time (F), torque (J)]``. With
``policy_obs_frames`` > 1 the policy's frame is followed by its past frames, each mirrored alike; the
critic's ``policy`` part is the current frame alone.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import mujoco
import numpy as np
import torch

from ppo_bootstrap.env import CRITIC, POLICY
from ppo_bootstrap.symmetry import SignPermutation, Symmetry

from isaac_adapter.tasks.g1_walk import assets
from isaac_adapter.tasks.g1_walk.config import G1WalkConfig

REFLECTION = np.diag([1.0, -1.0, 1.0])
"""``M``: the reflection ``y -> -y`` through the sagittal plane."""

POLAR = SignPermutation([0, 1, 2], [1.0, -1.0, 1.0])
"""Mirror of a body-frame polar vector (velocity, gravity): ``(x, -y, z)``."""
AXIAL = SignPermutation([0, 1, 2], [-1.0, 1.0, -1.0])
"""Mirror of a body-frame axial vector (angular velocity): ``(-x, y, -z)``."""
COMMAND = SignPermutation([0, 1, 2], [1.0, -1.0, -1.0])
"""Mirror of a velocity command ``(v_x, v_y, w_z)``: ``(v_x, -v_y, -w_z)``."""
CLOCK = SignPermutation([0, 1], [-1.0, -1.0])
"""Mirror of the gait clock ``(sin, cos)``: half a cycle later, ``(-sin, -cos)``."""

_AXIS_TOLERANCE = 1e-6  # |(-M a) . b| must be 1 to this (the menagerie G1: exact to 2e-16)
_ANCHOR_TOLERANCE_M = 1e-3  # mirrored joint anchors agree to this (the menagerie G1: 1e-5 m, the shoulders)


def mirror_name(name: str) -> str:
    """The name of ``name``'s mirror partner: ``left`` and ``right`` swapped (a centre name is its own)."""
    return name.replace("left", "\0").replace("right", "left").replace("\0", "right")


def name_permutation(names: Sequence[str]) -> list[int]:
    """``index[i]``: the position in ``names`` of ``names[i]``'s mirror partner.

    Raises:
        ValueError: a name's partner is missing.
    """
    position = {name: i for i, name in enumerate(names)}
    missing = [name for name in names if mirror_name(name) not in position]
    if missing:
        raise ValueError(f"no mirror partner for {missing} among {list(names)}")
    return [position[mirror_name(name)] for name in names]


def joint_mirror(model: mujoco.MjModel, joint_names: Sequence[str]) -> SignPermutation:
    """The mirror of per-joint vectors ``[..., J]`` (positions, velocities, torques, actions).

    Joint ``i`` trades places with its partner by name; the sign is ``-(M a) . b`` for the joint axes
    ``a`` and ``b`` of the pair in the root body's frame at the model's zero pose (``qpos0``).

    Raises:
        ValueError: in one line naming the joint, where the model is not mirror-symmetric there
            (the partner's axis is not ``+-M a`` or its anchor is not the mirror image).
    """
    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)
    free = [j for j in range(model.njnt) if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE]
    root = int(model.jnt_bodyid[free[0]]) if free else 0
    rot, origin = data.xmat[root].reshape(3, 3), data.xpos[root]

    def axis_and_anchor(name: str) -> tuple[np.ndarray, np.ndarray]:
        j = model.joint(name).id
        return rot.T @ data.xaxis[j], rot.T @ (data.xanchor[j] - origin)

    index = name_permutation(joint_names)
    sign = []
    for name, partner in zip(joint_names, index):
        axis, anchor = axis_and_anchor(name)
        partner_axis, partner_anchor = axis_and_anchor(joint_names[partner])
        s = float(-(REFLECTION @ axis) @ partner_axis)
        if abs(abs(s) - 1.0) > _AXIS_TOLERANCE:
            raise ValueError(f"joint {name!r}: the axis of {joint_names[partner]!r} is not the mirror image of "
                             f"its axis ({(-s):+.4f} along it): the model is not left-right symmetric")
        gap = float(np.abs(REFLECTION @ anchor - partner_anchor).max())
        if gap > _ANCHOR_TOLERANCE_M:
            raise ValueError(f"joint {name!r}: the anchor of {joint_names[partner]!r} is {gap:.4f} m from the "
                             "mirror image of its anchor: the model is not left-right symmetric")
        sign.append(float(np.sign(s)))
    return SignPermutation(index, sign)


@functools.lru_cache(maxsize=8)
def _model_joint_mirror(variant: str, sim_dt: float, joint_names: tuple[str, ...]) -> SignPermutation:
    return joint_mirror(assets.build_g1_model(variant, sim_dt).model, joint_names)


def g1_symmetry(
    cfg: G1WalkConfig,
    joint_names: Sequence[str],
    nominal_joint_pos: torch.Tensor | None = None,
    feet: Sequence[str] = assets.FEET,
) -> Symmetry:
    """The G1 walk task's mirror of its ``policy`` and ``critic`` groups and its actions.

    Args:
        cfg: the task (its ``model_variant`` gives the joint axes; ``gait_period_s`` whether the
            clock is observed).
        joint_names: the ``J`` actuated joints in actuator order.
        nominal_joint_pos: ``[J]`` the nominal pose; checked to be its own mirror image, since
            joint positions are observed relative to it.
        feet: the ``F`` foot bodies in the order the task reports them.

    Raises:
        ValueError: the model or the nominal pose is not left-right symmetric, or a partner is missing.
    """
    joints = _model_joint_mirror(cfg.model_variant, cfg.sim_dt, tuple(joint_names))
    if nominal_joint_pos is not None:
        nominal = nominal_joint_pos.detach().to("cpu", torch.float64)
        gap = float((joints(nominal) - nominal).abs().max()) if nominal.numel() else 0.0
        if gap > 1e-6:
            raise ValueError(f"the nominal joint pose is not left-right symmetric ({gap:.2e} rad off its mirror image)")
    foot = SignPermutation(name_permutation(feet), [1.0] * len(feet))
    parts = [AXIAL, POLAR, COMMAND, joints, joints, joints]
    if cfg.gait_period_s is not None:
        parts.append(CLOCK)
    frame = SignPermutation.concat(*parts)
    policy = SignPermutation.concat(*[frame] * cfg.policy_obs_frames)  # each past frame mirrors as the current
    critic = SignPermutation.concat(frame, POLAR, SignPermutation.identity(1), foot, foot, joints)
    return Symmetry({POLICY: policy, CRITIC: critic}, joints)
