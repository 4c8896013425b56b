"""Configuration of the G1 velocity-walking task, validated at construction.

Time is configured in seconds and converted to policy steps with ``policy_dt = sim_dt * decimation``
(never with a render interval). An episode step counter counts policy steps taken in the episode:
0 right after a reset, 1 after the first step. A rule with a start-of-episode grace window of
``grace_s`` seconds is checked at episode step ``k`` iff ``k * policy_dt >= grace_s``, i.e. from step
``ceil(grace_s / policy_dt)``. At 50 Hz (sim_dt 0.005, decimation 4): tilt is first checked at step
20 (t = 0.40 s), lateral velocity at step 35 (t = 0.70 s), height at step 1. The grace window is not a
debounce timer: once it is over a single step beyond the threshold ends the episode.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

_EPS = 1e-9  # relative tolerance for "a whole number of policy steps" (0.4 / 0.02 = 20.000000000000004)


def steps_from_seconds(seconds: float, policy_dt: float) -> int:
    """First episode step ``k`` with ``k * policy_dt >= seconds``: ``ceil(seconds / policy_dt)``, float-safe."""
    ratio = seconds / policy_dt
    nearest = round(ratio)
    if abs(ratio - nearest) <= _EPS * max(1.0, abs(ratio)):
        return int(nearest)
    return math.ceil(ratio)


@dataclass
class RewardWeights:
    """Reward term weights; every term is multiplied by ``policy_dt`` (as in Isaac Lab's reward manager)."""

    track_lin_vel_xy: float = 1.0
    track_ang_vel_z: float = 0.5
    lin_vel_z: float = -0.2
    ang_vel_xy: float = -0.05
    flat_orientation: float = -1.0
    feet_air_time: float = 0.75
    feet_slide: float = -0.1
    joint_deviation: float = -0.1
    joint_torques: float = -2.0e-6
    joint_acc: float = -1.0e-7
    action_rate: float = -0.01
    termination: float = -200.0
    # gait clock terms (see G1WalkConfig.gait_period_s); 0 unless the clock is on
    gait_contact: float = 0.0
    feet_swing_height: float = 0.0


@dataclass
class G1WalkConfig:
    """Everything that defines the task. Seconds in, policy steps derived (see the module docstring)."""

    num_envs: int = 64
    device: str = "cpu"
    seed: int = 0

    # physics and control
    # Which G1 file (see assets.VARIANTS). Evidence from benchmarks/g1_model_variants.py at sim_dt
    # 5 ms, decimation 4, the fall rules below, 16 envs for 4 s (first / mean fall, causes h/t/l):
    #                      menagerie (kp 500)  menagerie_mjx      playground_feetonly
    #   hold nominal pose  no fall             1.36 s, 0/16/0     1.16 s, 0/16/0
    #   +0.25 rad noise    0.50 / 0.73 s       0.76 / 1.15 s      0.60 / 0.92 s
    #   us per substep     78-111              66-69              53-58
    # menagerie_mjx survives exploration noise longest, is stable at 5 ms in its own integrator
    # (playground's Euler diverges there: joint speeds of 1e7 rad/s under 1.0 rad noise, vs 142 with
    # implicitfast), and collides body and limbs with the floor and each other, so terminal snapshots
    # are physical and legs cannot pass through each other; a substep costs ~15% more than the
    # feet-only model's, yet in the env loop (benchmarks/env_cpu.py, 64 envs) the two measured the
    # same within noise (4.4k vs 4.0k steps/s best of 3). Its hold fall (1.36 s, all by tilt)
    # matches the reference G1 the thresholds were tuned on (1.28 s, 16/16 tilt). The kp=500 model
    # stands only through gains about 6x the RL models' and falls soonest once the policy explores.
    model_variant: str = "menagerie_mjx"
    physics_threads: int = 0  # CPU backends: worker threads, 0 for every core
    sim_dt: float = 0.005
    decimation: int = 4
    episode_length_s: float = 20.0
    action_scale: float = 0.25  # rad of joint-position offset per unit action
    action_clip: float = 10.0
    joint_pos_noise: float = 0.05  # rad, uniform noise on the spawn pose

    # falls (terminated); see the module docstring for when each rule is checked
    train_collapse_height: float = 0.25  # m, root z; checked from step 1
    tilt_threshold: float = 0.8  # on tilt_xy = g_x^2 + g_y^2, gravity unit vector in the body frame
    tilt_grace_s: float = 0.4
    lateral_vel_threshold: float = 1.15  # m/s, |v_y| in the body frame
    lateral_grace_s: float = 0.7
    # evaluation acceptance is a different question from the training fall; only logged here
    eval_success_height: float = 0.60

    # commands [v_x, v_y, w_z], body frame, uniform per env, resampled on reset
    lin_vel_x_range: tuple[float, float] = (-0.5, 1.0)
    lin_vel_y_range: tuple[float, float] = (-0.3, 0.3)
    ang_vel_z_range: tuple[float, float] = (-0.5, 0.5)

    # observation scales (keep inputs O(1))
    obs_ang_vel_scale: float = 0.25
    obs_joint_vel_scale: float = 0.05
    obs_torque_scale: float = 0.02

    # reward shaping
    tracking_sigma: float = 0.25  # exp(-err^2 / sigma)
    air_time_threshold: float = 0.4  # s, cap on the single-stance time rewarded
    rewards: RewardWeights = field(default_factory=RewardWeights)

    # Optional gait clock: a phase that restarts with every episode and runs one cycle per
    # gait_period_s; (sin, cos) of it is appended to the policy observation and the gait_contact /
    # feet_swing_height rewards ask each foot to be down for the first gait_stance_fraction of its
    # cycle (legs half a cycle apart) and to swing at swing_height_m. None: no clock (Isaac Lab's
    # G1 recipe). See gait_clock_config().
    gait_period_s: float | None = None
    gait_stance_fraction: float = 0.55
    swing_height_m: float = 0.08  # m, foot body (ankle roll link) height in swing; ~0.03 standing

    def __post_init__(self) -> None:
        self.validate()

    @property
    def policy_dt(self) -> float:
        return self.sim_dt * self.decimation

    @property
    def max_episode_length(self) -> int:
        """Policy steps per episode; the step at which ``truncated`` is set."""
        return round(self.episode_length_s / self.policy_dt)

    @property
    def tilt_first_step(self) -> int:
        return steps_from_seconds(self.tilt_grace_s, self.policy_dt)

    @property
    def lateral_first_step(self) -> int:
        return steps_from_seconds(self.lateral_grace_s, self.policy_dt)

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first inconsistent setting."""
        if not self.decimation > 0 or int(self.decimation) != self.decimation:
            raise ValueError(f"decimation must be a positive integer, got {self.decimation}")
        if not self.sim_dt > 0:
            raise ValueError(f"sim_dt must be positive, got {self.sim_dt}")
        if not self.episode_length_s > 0:
            raise ValueError(f"episode_length_s must be positive, got {self.episode_length_s}")
        steps = self.episode_length_s / self.policy_dt
        if abs(steps - round(steps)) > _EPS * max(1.0, steps):
            raise ValueError(
                f"episode_length_s={self.episode_length_s} is {steps:.6g} policy steps of "
                f"{self.policy_dt:g} s; it must be a whole number"
            )
        if self.num_envs <= 0:
            raise ValueError(f"num_envs must be positive, got {self.num_envs}")
        for name in ("tilt_grace_s", "lateral_grace_s"):
            grace = getattr(self, name)
            if grace < 0:
                raise ValueError(f"{name} must be >= 0, got {grace}")
            if grace >= self.episode_length_s:
                raise ValueError(
                    f"{name}={grace} s is not shorter than the episode ({self.episode_length_s} s): "
                    "the rule would never fire"
                )
        if not self.train_collapse_height > 0:
            raise ValueError(f"train_collapse_height must be > 0 m, got {self.train_collapse_height}")
        if not 0 < self.tilt_threshold < 1:
            raise ValueError(f"tilt_threshold must be in (0, 1) (tilt_xy lies in [0, 1]), got {self.tilt_threshold}")
        if not self.lateral_vel_threshold > 0:
            raise ValueError(f"lateral_vel_threshold must be > 0 m/s, got {self.lateral_vel_threshold}")
        if not self.action_scale > 0:
            raise ValueError(f"action_scale must be > 0, got {self.action_scale}")
        if self.joint_pos_noise < 0:
            raise ValueError(f"joint_pos_noise must be >= 0, got {self.joint_pos_noise}")
        if self.gait_period_s is not None and not self.gait_period_s > 2 * self.policy_dt:
            raise ValueError(f"gait_period_s must be longer than two policy steps, got {self.gait_period_s}")
        if not 0 < self.gait_stance_fraction < 1:
            raise ValueError(f"gait_stance_fraction must be in (0, 1), got {self.gait_stance_fraction}")
        for name in ("lin_vel_x_range", "lin_vel_y_range", "ang_vel_z_range"):
            lo, hi = getattr(self, name)
            if lo > hi:
                raise ValueError(f"{name} must be (low, high) with low <= high, got {(lo, hi)}")


def gait_clock_config(period_s: float = 0.8, **overrides) -> G1WalkConfig:
    """The task with the gait clock on: a 0.8 s cycle, 55 % stance per foot (0.1 of the cycle on
    both feet), i.e. 2.5 touchdowns/s and 0.36 s swings if the policy follows it.

    Weights follow the clock-driven G1 recipes (contact match 0.18 per foot, swing height -20);
    every other term is the default task's.
    """
    cfg = G1WalkConfig(gait_period_s=period_s, **overrides)
    # a copy: a RewardWeights passed in through overrides stays as it was
    cfg.rewards = replace(cfg.rewards, gait_contact=0.18, feet_swing_height=-20.0)
    return cfg


def walk_config(gait_clock: bool = False, **overrides) -> G1WalkConfig:
    """The default task, or with ``gait_clock`` its gait-clock variant (:func:`gait_clock_config`)."""
    return gait_clock_config(**overrides) if gait_clock else G1WalkConfig(**overrides)
