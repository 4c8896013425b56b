"""G1 walk: step arithmetic, fall rules and config validation on batched tensors (no physics)."""

from __future__ import annotations

import math

import pytest
import torch

from isaac_adapter.tasks.g1_walk import causes, terms
from isaac_adapter.tasks.g1_walk.config import G1WalkConfig, steps_from_seconds

# hand-derived: tilt grace 0.4 s, lateral grace 0.7 s, episode 20 s
# policy_dt = sim_dt * decimation; first checked step = ceil(grace / policy_dt)
TIMING = [
    # sim_dt, decimation, policy_dt, tilt_first, lateral_first, timeout_step
    (0.005, 4, 0.02, 20, 35, 1000),
    (0.005, 2, 0.01, 40, 70, 2000),
    (0.005, 8, 0.04, 10, 18, 500),  # 0.7 / 0.04 = 17.5: step 17 is 0.68 s (< 0.7), step 18 is 0.72 s
    (0.0025, 2, 0.005, 80, 140, 4000),
    (0.0025, 4, 0.01, 40, 70, 2000),
    (0.0025, 8, 0.02, 20, 35, 1000),
]


@pytest.mark.parametrize("sim_dt, decimation, policy_dt, tilt_first, lateral_first, timeout_step", TIMING)
def test_grace_windows_are_the_same_seconds_at_every_rate(
    sim_dt: float, decimation: int, policy_dt: float, tilt_first: int, lateral_first: int, timeout_step: int
) -> None:
    cfg = G1WalkConfig(sim_dt=sim_dt, decimation=decimation)
    assert cfg.policy_dt == pytest.approx(policy_dt)
    assert (cfg.tilt_first_step, cfg.lateral_first_step, cfg.max_episode_length) == (
        tilt_first,
        lateral_first,
        timeout_step,
    )
    # the first checked step is the first one whose elapsed time reaches the window
    for first, grace in ((tilt_first, 0.4), (lateral_first, 0.7)):
        assert first * policy_dt >= grace - 1e-12
        assert (first - 1) * policy_dt < grace - 1e-12

    # both sides of each boundary, through the termination terms
    first_checked = torch.tensor([1, tilt_first, lateral_first])
    for column, first in ((1, tilt_first), (2, lateral_first)):
        raw = torch.zeros(2, 3, dtype=torch.bool)
        raw[:, column] = True  # over the threshold at both steps
        steps = torch.tensor([first - 1, first])
        active = terms.active_falls(raw, steps, first_checked)
        assert active[:, column].tolist() == [False, True]
        assert active.sum() == 1
    timed_out = terms.time_out(torch.tensor([timeout_step - 1, timeout_step]), cfg.max_episode_length)
    assert timed_out.tolist() == [False, True]


def test_steps_from_seconds_tolerates_float_error() -> None:
    assert math.ceil(0.14 / 0.02) == 8  # 7.000000000000001: a naive ceil is one step late
    assert steps_from_seconds(0.14, 0.02) == 7
    assert steps_from_seconds(0.4, 0.02) == 20
    assert steps_from_seconds(0.7, 0.04) == 18
    assert steps_from_seconds(0.0, 0.02) == 0


def test_height_fires_at_step_one_and_cause_priority() -> None:
    cfg = G1WalkConfig()
    first_checked = torch.tensor([1, cfg.tilt_first_step, cfg.lateral_first_step])
    # env 0: everything over at step 1 -> only height is checked yet
    # env 1: everything over at step 40 -> all three fire, height wins
    # env 2: tilt and lateral at step 40 -> tilt wins
    # env 3: lateral alone at step 40
    # env 4: lateral alone at step 34 (grace) -> nothing
    # env 5: nothing, timeout step -> timeout
    # env 6: tilt at the timeout step -> terminated and truncated, cause tilt
    raw = torch.tensor(
        [[1, 1, 1], [1, 1, 1], [0, 1, 1], [0, 0, 1], [0, 0, 1], [0, 0, 0], [0, 1, 0]], dtype=torch.bool
    )
    step = torch.tensor([1, 40, 40, 40, 34, 1000, 1000])
    active = terms.active_falls(raw, step, first_checked)
    timed_out = terms.time_out(step, cfg.max_episode_length)
    cause = terms.exclusive_cause(active, timed_out)
    assert active.tolist() == [
        [True, False, False],
        [True, True, True],
        [False, True, True],
        [False, False, True],
        [False, False, False],
        [False, False, False],
        [False, True, False],
    ]
    assert cause.tolist() == [
        causes.CAUSE_HEIGHT,
        causes.CAUSE_HEIGHT,
        causes.CAUSE_TILT,
        causes.CAUSE_LATERAL,
        causes.CAUSE_NONE,
        causes.CAUSE_TIMEOUT,
        causes.CAUSE_TILT,
    ]
    assert timed_out.tolist() == [False] * 5 + [True, True]


def test_root_in_body_rotates_gravity_and_both_velocities_at_once() -> None:
    # body rotated about world x by theta: a world vector v is R_x(theta)^T v in the body,
    # so gravity (0, 0, -1) -> (0, -sin, -cos) and world z (0, 0, 1) -> (0, sin, cos)
    theta, psi = math.radians(35), math.pi / 2
    quat = torch.tensor([[math.cos(theta / 2), math.sin(theta / 2), 0.0, 0.0],
                         [math.cos(psi / 2), 0.0, 0.0, math.sin(psi / 2)]])  # the second yawed 90 deg
    lin_vel_w = torch.tensor([[0.0, 0.0, 2.0], [1.2, 0.0, 0.0]])
    ang_vel_w = torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 0.7]])
    gravity_b, lin_vel_b, ang_vel_b = terms.root_in_body(quat, lin_vel_w, ang_vel_w)
    s, c = math.sin(theta), math.cos(theta)
    assert gravity_b.tolist() == [pytest.approx([0.0, -s, -c], abs=1e-6), pytest.approx([0.0, 0.0, -1.0], abs=1e-6)]
    assert lin_vel_b.tolist() == [pytest.approx([0.0, 2 * s, 2 * c], abs=1e-6), pytest.approx([0.0, -1.2, 0.0], abs=1e-6)]
    assert ang_vel_b.tolist() == [pytest.approx([0.0, s, c], abs=1e-6), pytest.approx([0.0, 0.0, 0.7], abs=1e-6)]
    # the same numbers as one rotation per vector
    torch.testing.assert_close(gravity_b, terms.projected_gravity(quat), rtol=0, atol=1e-7)
    torch.testing.assert_close(lin_vel_b, terms.to_body(quat, lin_vel_w), rtol=0, atol=1e-7)
    torch.testing.assert_close(ang_vel_b, terms.to_body(quat, ang_vel_w), rtol=0, atol=1e-7)


def test_fall_signals_thresholds_and_frames() -> None:
    # tilt about body x by theta: body-frame gravity (0, -sin, -cos), tilt_xy = sin^2
    def about_x(theta: float) -> list[float]:
        return [math.cos(theta / 2), math.sin(theta / 2), 0.0, 0.0]

    def about_z(psi: float) -> list[float]:
        return [math.cos(psi / 2), 0.0, 0.0, math.sin(psi / 2)]

    quat = torch.tensor([about_x(math.radians(60)), about_x(math.radians(70)), about_z(math.pi / 2), about_z(0.0)])
    gravity_b = terms.projected_gravity(quat)
    expected_tilt = [0.75, math.sin(math.radians(70)) ** 2, 0.0, 0.0]
    assert terms.tilt_xy(gravity_b).tolist() == pytest.approx(expected_tilt, abs=1e-6)
    # yawed 90 deg: world +x velocity is body -y (lateral); unyawed 1.10 m/s sideways is under the limit
    lin_vel_w = torch.tensor([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [1.2, 0.0, 0.0], [0.0, 1.10, 0.0]])
    lin_vel_b = terms.to_body(quat, lin_vel_w)
    assert lin_vel_b[2].tolist() == pytest.approx([0.0, -1.2, 0.0], abs=1e-6)
    height = torch.tensor([0.26, 0.24, 0.7, 0.7])
    raw = terms.fall_signals(height, terms.tilt_xy(gravity_b), lin_vel_b, 0.25, 0.8, 1.15)
    assert raw.tolist() == [
        [False, False, False],
        [True, True, False],
        [False, False, True],
        [False, False, False],
    ]


def test_record_first_keeps_the_first_crossing() -> None:
    first = torch.full((2, 3), causes.NEVER)
    first = terms.record_first(first, torch.tensor([[0, 1, 0], [0, 0, 0]], dtype=torch.bool), torch.tensor([5, 5]))
    first = terms.record_first(first, torch.tensor([[1, 1, 0], [0, 0, 1]], dtype=torch.bool), torch.tensor([9, 9]))
    assert first.tolist() == [[9, 5, -1], [-1, -1, 9]]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"tilt_grace_s": 25.0}, "tilt_grace_s"),
        ({"lateral_grace_s": 20.0}, "lateral_grace_s"),
        ({"decimation": 0}, "decimation"),
        ({"decimation": -4}, "decimation"),
        ({"sim_dt": 0.0}, "sim_dt"),
        ({"sim_dt": -0.005}, "sim_dt"),
        ({"episode_length_s": 20.01}, "whole number"),
        ({"train_collapse_height": -0.25}, "train_collapse_height"),
        ({"tilt_threshold": -0.8}, "tilt_threshold"),
        ({"lateral_vel_threshold": -1.15}, "lateral_vel_threshold"),
        ({"tilt_grace_s": -0.4}, "tilt_grace_s"),
        ({"lin_vel_x_range": (1.0, -0.5)}, "lin_vel_x_range"),
        ({"lin_vel_y_range": (-math.inf, 0.5)}, "lin_vel_y_range"),
        ({"ang_vel_z_range": (0.5, -0.5)}, "ang_vel_z_range"),
        ({"rel_standing_envs": -0.1}, "rel_standing_envs"),
        ({"rel_standing_envs": 1.5}, "rel_standing_envs"),
        ({"resampling_time_range": (0.0, 10.0)}, "resampling_time_range"),
        ({"resampling_time_range": (10.0, 5.0)}, "resampling_time_range"),
        ({"solver_iterations": 0}, "solver_iterations"),
        ({"solver_iterations": 2.5}, "solver_iterations"),
        ({"ls_iterations": -1}, "ls_iterations"),
        ({"warp_box_box": "gjk"}, "warp_box_box must be one of primitive, convex"),
    ],
)
def test_config_rejects_inconsistent_settings(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        G1WalkConfig(**kwargs)


def test_feet_air_time_rewards_single_stance_only() -> None:
    contact = torch.tensor([[True, True], [True, False], [True, False], [False, False]])
    air = torch.tensor([[0.0, 0.0], [0.0, 0.3], [0.0, 0.6], [0.1, 0.2]])
    stance = torch.tensor([[1.0, 1.0], [0.2, 0.0], [0.5, 0.0], [0.0, 0.0]])
    command = torch.tensor([[0.5, 0.0, 0.0]] * 4)
    reward = terms.feet_air_time_biped(air, stance, contact, command, threshold=0.4)
    # double stance 0; single stance: min(stance time of the down foot, air time of the up foot), capped
    assert reward.tolist() == pytest.approx([0.0, 0.2, 0.4, 0.0])
    assert terms.feet_air_time_biped(air, stance, contact, torch.zeros(4, 3), 0.4).abs().sum() == 0


def test_the_gate_battery_lies_inside_the_command_ranges_with_a_margin() -> None:
    from isaac_adapter.evaluation.gate import BATTERY

    cfg = G1WalkConfig()
    ranges = (cfg.lin_vel_x_range, cfg.lin_vel_y_range, cfg.ang_vel_z_range)
    for name, command in BATTERY:
        for value, (lo, hi) in zip(command, ranges):
            assert lo + 0.1 <= value <= hi - 0.1 or value == 0.0, (name, command, ranges)
    assert 0 < cfg.rel_standing_envs < 1  # the battery's 'stand' is drawn too


def test_joint_vel_l2_sums_the_masked_joints_squared() -> None:
    joint_vel = torch.tensor([[1.0, -2.0, 3.0], [0.5, 0.0, -4.0]])
    mask = torch.tensor([1.0, 1.0, 0.0])
    # env 0: 1 + 4 (joint 2 masked out); env 1: 0.25 + 0
    assert terms.joint_vel_l2(joint_vel, mask).tolist() == [5.0, 0.25]


def test_action_rate_and_ang_vel_xy_by_hand() -> None:
    action = torch.tensor([[0.5, -1.0], [0.0, 0.0]])
    last = torch.tensor([[0.25, 1.0], [0.0, 3.0]])
    assert terms.action_rate_l2(action, last).tolist() == [0.0625 + 4.0, 9.0]
    ang_vel_b = torch.tensor([[0.1, -0.2, 5.0], [0.0, 0.0, -1.0]])  # yaw rate is not penalised
    assert terms.ang_vel_xy_l2(ang_vel_b).tolist() == pytest.approx([0.05, 0.0])


def test_projected_gravity_of_a_batch_of_any_shape() -> None:
    upright = torch.tensor([1.0, 0.0, 0.0, 0.0])
    half = math.sqrt(0.5)  # 90 deg about x: down (0, 0, -1) seen from the body is (0, -1, 0)
    rolled = torch.tensor([half, half, 0.0, 0.0])
    quat = torch.stack([torch.stack([upright, rolled])] * 3)  # [3, 2, 4]
    gravity = terms.projected_gravity(quat)
    assert gravity.shape == (3, 2, 3)
    torch.testing.assert_close(gravity[:, 0], torch.tensor([[0.0, 0.0, -1.0]] * 3))
    torch.testing.assert_close(gravity[:, 1], torch.tensor([[0.0, -1.0, 0.0]] * 3))
