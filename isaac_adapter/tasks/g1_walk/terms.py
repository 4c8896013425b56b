"""Observation, reward and termination terms of the G1 walk task.

Small pure functions over batched torch tensors (``N`` envs, ``J = 29`` joints, ``F = 2`` feet), so
the same code runs on every physics backend and can be tested without physics.
"""

from __future__ import annotations

import torch

from isaac_adapter.math import quat_apply_inverse
from isaac_adapter.tasks.g1_walk.causes import CAUSE_NONE, CAUSE_TIMEOUT, NEVER, SIGNAL_CAUSES
from isaac_adapter.tasks.g1_walk.config import steps_from_seconds


# -- frames -------------------------------------------------------------------------------------


def projected_gravity(quat_w: torch.Tensor) -> torch.Tensor:
    """Gravity unit vector in the body frame ``[..., 3]`` of ``quat_w`` ``[..., 4]``; ``(0, 0, -1)`` when upright.

    The world's down vector is made on ``quat_w``'s device (a ``torch.tensor`` of Python numbers
    would be a host-to-device copy, which synchronises with the GPU, at every call).
    """
    down = torch.zeros_like(quat_w[..., :3])
    down[..., 2] = -1.0
    return quat_apply_inverse(quat_w, down)


def to_body(quat_w: torch.Tensor, vec_w: torch.Tensor) -> torch.Tensor:
    """World vector ``[N, 3]`` in the body frame."""
    return quat_apply_inverse(quat_w, vec_w)


def root_in_body(quat_w: torch.Tensor, lin_vel_w: torch.Tensor, ang_vel_w: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gravity, linear and angular velocity of the root in its body frame, each ``[N, 3]``, from
    ``quat_w`` ``[N, 4]`` and the world-frame velocities ``[N, 3]``: :func:`projected_gravity` and
    :func:`to_body` twice, as one rotation of the three stacked vectors (a third of the kernels)."""
    down = torch.zeros_like(lin_vel_w)
    down[..., 2] = -1.0
    rotated = quat_apply_inverse(quat_w.unsqueeze(-2), torch.stack((down, lin_vel_w, ang_vel_w), dim=-2))
    gravity_b, lin_vel_b, ang_vel_b = rotated.unbind(-2)
    return gravity_b, lin_vel_b, ang_vel_b


def tilt_xy(gravity_b: torch.Tensor) -> torch.Tensor:
    """Sum of squared horizontal components of the body-frame gravity ``[N]``: 0 upright, 1 lying flat."""
    return gravity_b[:, 0].square() + gravity_b[:, 1].square()


# -- terminations -------------------------------------------------------------------------------


def fall_signals(
    root_height: torch.Tensor,
    tilt: torch.Tensor,
    lin_vel_b: torch.Tensor,
    min_height: float,
    max_tilt_xy: float,
    max_lateral_vel: float,
) -> torch.Tensor:
    """Raw threshold crossings ``[N, 3]`` bool (height, tilt, lateral), grace windows not applied.

    The thresholds are parameters so that one rule serves training (``train_collapse_height``) and
    every evaluation threshold set (``eval_success_height``).

    Args:
        root_height: ``[N]`` root z in m; below ``min_height`` is a fall.
        tilt: ``[N]`` :func:`tilt_xy` of the projected gravity; above ``max_tilt_xy`` is a fall.
        lin_vel_b: ``[N, 3]`` root linear velocity in the body frame; ``|v_y|`` above
            ``max_lateral_vel`` (m/s) is a fall.
    """
    return torch.stack(
        [
            root_height < min_height,
            tilt > max_tilt_xy,
            lin_vel_b[:, 1].abs() > max_lateral_vel,
        ],
        dim=-1,
    )


def first_checked_steps(
    tilt_grace_s: float, lateral_grace_s: float, policy_dt: float, device: torch.device | str = "cpu"
) -> torch.Tensor:
    """``[3]`` long: first episode step each fall rule is checked (height, tilt, lateral).

    Height is checked from step 1; tilt and lateral after their start-of-episode grace windows
    (``config.steps_from_seconds``). No rule starts before step 1, the first step of an episode.
    """
    steps = [1, steps_from_seconds(tilt_grace_s, policy_dt), steps_from_seconds(lateral_grace_s, policy_dt)]
    return torch.tensor([max(1, step) for step in steps], device=device)


def active_falls(raw: torch.Tensor, episode_step: torch.Tensor, first_checked_step: torch.Tensor) -> torch.Tensor:
    """Crossings that count ``[N, 3]``: rule ``i`` is checked iff ``episode_step >= first_checked_step[i]``.

    Args:
        raw: ``[N, 3]`` bool from :func:`fall_signals`.
        episode_step: ``[N]`` long, policy steps taken in the episode (1 after the first step).
        first_checked_step: ``[3]`` long, from :func:`first_checked_steps`.
    """
    return raw & (episode_step.unsqueeze(-1) >= first_checked_step)


def time_out(episode_step: torch.Tensor, max_episode_length: int) -> torch.Tensor:
    """``[N]`` bool: the episode budget is spent (set at step ``max_episode_length`` exactly)."""
    return episode_step >= max_episode_length


def exclusive_cause(active: torch.Tensor, timed_out: torch.Tensor) -> torch.Tensor:
    """One cause per env ``[N]`` long: the first active fall in priority order, else timeout, else none.

    Args:
        active: ``[N, 3]`` bool from :func:`active_falls`.
        timed_out: ``[N]`` bool from :func:`time_out`.
    """
    cause = torch.full_like(timed_out, CAUSE_NONE, dtype=torch.long)
    cause = torch.where(timed_out, CAUSE_TIMEOUT, cause)
    # lowest priority first so higher-priority falls overwrite
    for column in reversed(range(len(SIGNAL_CAUSES))):
        cause = torch.where(active[:, column], SIGNAL_CAUSES[column], cause)
    return cause


def record_first(first_step: torch.Tensor, crossed: torch.Tensor, episode_step: torch.Tensor) -> torch.Tensor:
    """Keep the first step each signal crossed: ``[N, 3]`` long, :data:`NEVER` until it does."""
    new = crossed & (first_step == NEVER)
    return torch.where(new, episode_step.unsqueeze(-1).expand_as(first_step), first_step)


# -- observations -------------------------------------------------------------------------------


#: The policy observation's terms in their order (:func:`policy_obs`; the gait clock's
#: :data:`CLOCK_TERM` follows when on): what a deployment computes from its IMU and encoders.
POLICY_OBS_TERMS = ("base_ang_vel", "projected_gravity", "velocity_command", "joint_pos_rel", "joint_vel", "last_action")
CLOCK_TERM = "gait_clock"


def policy_obs_scales(ang_vel_scale: float, joint_vel_scale: float) -> dict[str, float]:
    """The factor each of :data:`POLICY_OBS_TERMS` is multiplied by in the observation."""
    scales = dict.fromkeys(POLICY_OBS_TERMS, 1.0)
    scales.update(base_ang_vel=ang_vel_scale, joint_vel=joint_vel_scale)
    return scales


def policy_obs(
    ang_vel_b: torch.Tensor,
    gravity_b: torch.Tensor,
    command: torch.Tensor,
    joint_pos_rel: torch.Tensor,
    joint_vel: torch.Tensor,
    last_action: torch.Tensor,
    ang_vel_scale: float,
    joint_vel_scale: float,
) -> torch.Tensor:
    """Actor input ``[N, 9 + 3J]``: what the real robot's IMU and encoders provide, the terms of
    :data:`POLICY_OBS_TERMS` in that order, each times its :func:`policy_obs_scales` factor."""
    raw = (ang_vel_b, gravity_b, command, joint_pos_rel, joint_vel, last_action)
    scales = policy_obs_scales(ang_vel_scale, joint_vel_scale)
    # a factor of 1 is no multiplication: no kernel, and the same bits
    return torch.cat([x if scales[name] == 1.0 else x * scales[name] for name, x in zip(POLICY_OBS_TERMS, raw)], dim=-1)


def policy_term_widths(num_joints: int, clock: bool) -> dict[str, int]:
    """The columns of each term of the policy observation, in its order: :func:`policy_obs`'s terms,
    then the gait clock's (:func:`clock_obs`) when on. Keys are ``randomization.POLICY_TERMS``."""
    widths = {"ang_vel": 3, "gravity": 3, "command": 3, "joint_pos": num_joints, "joint_vel": num_joints,
              "last_action": num_joints}
    if clock:
        widths["clock"] = 2
    return widths


def policy_frame_width(num_joints: int, clock: bool) -> int:
    """The columns of one frame of the policy observation (:func:`policy_term_widths` summed)."""
    return sum(policy_term_widths(num_joints, clock).values())


def stack_policy_frames(frame: torch.Tensor, history: torch.Tensor, started: torch.Tensor) -> torch.Tensor:
    """The policy observation with history: ``[N, (1 + H) D]``, the current ``frame`` ``[N, D]`` then
    ``history`` ``[N, H, D]`` (the frames acted on before, newest first). Where an episode has no
    history yet (``started`` ``[N]`` bool false: no step since its reset) every past slot is the
    current frame, its first."""
    past = torch.where(started.view(-1, 1, 1), history, frame.unsqueeze(1))
    return torch.cat([frame, past.flatten(1)], dim=-1)


def push_policy_frame(history: torch.Tensor, started: torch.Tensor, frame: torch.Tensor) -> None:
    """Record the ``frame`` ``[N, D]`` the policy just acted on in ``history`` ``[N, H, D]``, newest
    first, and set ``started`` ``[N]``, both in place (a recorded CUDA graph reads the same buffers).
    An episode's first frame fills every slot, so that until it has ``H`` steps the oldest frames
    repeat its first (as :func:`stack_policy_frames` shows them before its first step)."""
    shifted = torch.cat([frame.unsqueeze(1), history[:, :-1]], dim=1)
    history.copy_(torch.where(started.view(-1, 1, 1), shifted, frame.unsqueeze(1).expand_as(history)))
    started.fill_(True)


def gait_phase(episode_step: torch.Tensor, dt: float, period_s: float) -> torch.Tensor:
    """Phase of the gait clock ``[N]`` in ``[0, 1)``: 0 at every episode start, one cycle per ``period_s``."""
    return torch.remainder(episode_step.to(torch.float32) * (dt / period_s), 1.0)


def leg_phases(phase: torch.Tensor) -> torch.Tensor:
    """Per-foot phase ``[N, 2]`` (left, right): the legs half a cycle apart, as in a walk."""
    return torch.remainder(torch.stack([phase, phase + 0.5], dim=-1), 1.0)


def clock_obs(phase: torch.Tensor) -> torch.Tensor:
    """``[N, 2]`` ``(sin, cos)`` of the clock: continuous across the wrap from 1 to 0."""
    angle = 2.0 * torch.pi * phase
    return torch.stack([torch.sin(angle), torch.cos(angle)], dim=-1)


def critic_privileged(
    lin_vel_b: torch.Tensor,
    root_height: torch.Tensor,
    foot_contact: torch.Tensor,
    air_time: torch.Tensor,
    torque: torch.Tensor,
    torque_scale: float,
) -> torch.Tensor:
    """Extra critic input ``[N, 3 + 1 + 2F + J]``: state the robot cannot measure but the value needs."""
    return torch.cat(
        [lin_vel_b, root_height.unsqueeze(-1), foot_contact.float(), air_time, torque * torque_scale], dim=-1
    )


# -- gait bookkeeping ---------------------------------------------------------------------------


def update_gait(
    contact: torch.Tensor, air_time: torch.Tensor, contact_time: torch.Tensor, dt: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Advance per-foot timers by one policy step.

    Args:
        contact: ``[N, F]`` bool, foot in contact now.
        air_time: ``[N, F]`` s since the foot left the ground (0 while in contact).
        contact_time: ``[N, F]`` s since the foot touched down (0 while in the air).

    Returns:
        ``(air_time, contact_time, touchdown)``; ``touchdown`` ``[N, F]`` bool marks the first contact step.
    """
    touchdown = contact & (air_time > 0)
    air_time = torch.where(contact, torch.zeros_like(air_time), air_time + dt)
    contact_time = torch.where(contact, contact_time + dt, torch.zeros_like(contact_time))
    return air_time, contact_time, touchdown


# -- rewards (each returns [N], unweighted) --------------------------------------------------------


def ramped_weights(table: torch.Tensor, step: torch.Tensor) -> torch.Tensor:
    """Reward weights ``[T]`` after ``step`` env steps (a 0-dim float tensor, so that the count can
    live on the device) from ``table`` ``[4, T]`` (``G1WalkConfig.reward_ramp_table``): the
    configured weight up to the ramp's start, then linear to its end weight over its length, then
    held (``RewardRamp.weight_at``, one formula for every term)."""
    base, target, start, span = table.unbind(0)
    return base + (target - base) * ((step - start) / span).clamp(0.0, 1.0)


def track_lin_vel_xy_exp(command: torch.Tensor, lin_vel_b: torch.Tensor, sigma: float) -> torch.Tensor:
    """``exp(-|v_xy - cmd_xy|^2 / sigma)``: 1 when the planar velocity matches the command."""
    return torch.exp(-(command[:, :2] - lin_vel_b[:, :2]).square().sum(-1) / sigma)


def track_ang_vel_z_exp(command: torch.Tensor, ang_vel_b: torch.Tensor, sigma: float) -> torch.Tensor:
    """``exp(-(w_z - cmd_wz)^2 / sigma)``."""
    return torch.exp(-(command[:, 2] - ang_vel_b[:, 2]).square() / sigma)


def lin_vel_z_l2(lin_vel_b: torch.Tensor) -> torch.Tensor:
    return lin_vel_b[:, 2].square()


def ang_vel_xy_l2(ang_vel_b: torch.Tensor) -> torch.Tensor:
    """``[N]`` squared body roll and pitch rates (rad/s, body frame ``[N, 3]``), summed."""
    return ang_vel_b[:, :2].square().sum(-1)


def flat_orientation_l2(gravity_b: torch.Tensor) -> torch.Tensor:
    """Upright term: squared horizontal gravity (the same quantity as :func:`tilt_xy`)."""
    return tilt_xy(gravity_b)


def feet_air_time_biped(
    air_time: torch.Tensor, contact_time: torch.Tensor, contact: torch.Tensor, command: torch.Tensor, threshold: float
) -> torch.Tensor:
    """Reward single stance: time the stance foot has been down (capped), only when asked to move.

    A shuffle with both feet on the ground (the "slid 4.7 m with double support 1.0" failure) earns 0.
    """
    single_stance = contact.sum(-1) == 1
    in_mode = torch.where(contact, contact_time, air_time)
    reward = torch.where(single_stance, in_mode.amin(-1), torch.zeros_like(in_mode[:, 0]))
    moving = command[:, :2].norm(dim=-1) > 0.1
    return reward.clamp(max=threshold) * moving


def gait_contact(contact: torch.Tensor, leg_phase: torch.Tensor, stance_fraction: float) -> torch.Tensor:
    """Feet whose contact matches the clock ``[N]`` in ``{0, 1, 2}``: a foot should be down while its
    phase is below ``stance_fraction`` and up after. ``contact``, ``leg_phase`` ``[N, F]``."""
    return (contact == (leg_phase < stance_fraction)).float().sum(-1)


def feet_swing_height(foot_height: torch.Tensor, contact: torch.Tensor, target_m: float) -> torch.Tensor:
    """``[N]`` squared distance of each airborne foot's height ``[N, F]`` (m) from ``target_m``: lift the
    feet clear of the ground, and no higher."""
    return ((foot_height - target_m).square() * ~contact).sum(-1)


def feet_slide(contact: torch.Tensor, foot_lin_vel_w: torch.Tensor) -> torch.Tensor:
    """Horizontal speed of feet that are on the ground ``[N]``."""
    return (foot_lin_vel_w[..., :2].norm(dim=-1) * contact).sum(-1)


def joint_deviation_l1(joint_pos_rel: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Distance from the nominal pose of the masked joints (arms, waist, hip yaw/roll)."""
    return (joint_pos_rel.abs() * mask).sum(-1)


def joint_torques_l2(torque: torch.Tensor) -> torch.Tensor:
    return torque.square().sum(-1)


def joint_acc_l2(joint_vel: torch.Tensor, prev_joint_vel: torch.Tensor, dt: float) -> torch.Tensor:
    return ((joint_vel - prev_joint_vel) / dt).square().sum(-1)


def action_rate_l2(action: torch.Tensor, last_action: torch.Tensor) -> torch.Tensor:
    """``[N]`` squared change of every joint's action ``[N, J]`` since the last policy step, summed."""
    return (action - last_action).square().sum(-1)


def joint_vel_l2(joint_vel: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``[N]`` squared joint velocities ``[N, J]`` (rad/s) of the joints in ``mask`` ``[J]`` (1 or 0), summed."""
    return (joint_vel.square() * mask).sum(-1)
