"""Hand-made traces with known answers: the notes' v92 slide and a clean alternating walk.

Used by the tests and handy for checking a new metric by hand. ``T`` steps, ``N`` envs.
"""

from __future__ import annotations

import torch

from isaac_adapter.evaluation.trace import RolloutTrace


def make_trace(
    num_steps: int,
    num_envs: int,
    dt: float = 0.02,
    base_height: torch.Tensor | None = None,
    tilt_xy: torch.Tensor | None = None,
    lateral_vel: torch.Tensor | None = None,
    forward_vel: torch.Tensor | None = None,
    foot_contact: torch.Tensor | None = None,
    command: tuple[float, float, float] = (0.5, 0.0, 0.0),
    terminated: torch.Tensor | None = None,
    truncated: torch.Tensor | None = None,
    torque: torch.Tensor | None = None,
) -> RolloutTrace:
    """A :class:`RolloutTrace` from the given ``[T, N]`` signals; defaults: standing upright at 0.75 m,
    no velocity, both feet down, no end. The root moves along x by the integral of ``forward_vel``
    (body frame = world frame here: no rotation)."""
    shape = (num_steps, num_envs)
    zeros = torch.zeros(shape)
    height = base_height if base_height is not None else torch.full(shape, 0.75)
    vx = forward_vel if forward_vel is not None else zeros
    vy = lateral_vel if lateral_vel is not None else zeros
    x = torch.cumsum(vx * dt, dim=0)
    y = torch.cumsum(vy * dt, dim=0)
    return RolloutTrace(
        dt=dt,
        start_pos_w=torch.tensor([0.0, 0.0, 0.75]).repeat(num_envs, 1),
        root_pos_w=torch.stack([x, y, height], dim=-1),
        tilt_xy=tilt_xy if tilt_xy is not None else zeros.clone(),
        lin_vel_b=torch.stack([vx, vy, zeros], dim=-1),
        ang_vel_b=torch.zeros(*shape, 3),
        foot_contact=foot_contact if foot_contact is not None else torch.ones(*shape, 2, dtype=torch.bool),
        torque=torque if torque is not None else torch.zeros(*shape, 4),
        command=torch.tensor(command).expand(*shape, 3).clone(),
        env_cause=torch.zeros(shape, dtype=torch.long),
        reward=zeros.clone(),
        terminated=terminated if terminated is not None else torch.zeros(shape, dtype=torch.bool),
        truncated=truncated if truncated is not None else torch.zeros(shape, dtype=torch.bool),
        horizon_steps=num_steps,
    )


def alternating_contact(num_steps: int, num_envs: int, period_steps: int = 50, swing_steps: int = 15) -> torch.Tensor:
    """``[T, N, 2]`` bool walk: per cycle of ``period_steps`` the left foot swings during steps
    ``[5, 5 + swing_steps)`` and the right foot half a cycle later; every other step both feet are down."""
    phase = torch.arange(num_steps) % period_steps
    half = period_steps // 2
    left_air = (phase >= 5) & (phase < 5 + swing_steps)
    right_air = (phase >= 5 + half) & (phase < 5 + half + swing_steps)
    contact = torch.stack([~left_air, ~right_air], dim=-1)
    return contact.unsqueeze(1).expand(num_steps, num_envs, 2).clone()


def v92_slide(num_envs: int = 1, dt: float = 0.02, horizon_s: float = 15.0, distance_m: float = 4.748) -> RolloutTrace:
    """The notes' v92: 15 s, no fall, ``distance_m`` forward, both feet on the ground throughout."""
    steps = round(horizon_s / dt)
    speed = distance_m / horizon_s
    return make_trace(steps, num_envs, dt, forward_vel=torch.full((steps, num_envs), speed),
                      command=(speed, 0.0, 0.0))
