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

from isaac_adapter.tasks.g1_walk.randomization import RandomizationCfg, as_randomization, robust_randomization

WARP_BOX_BOX = ("primitive", "convex")  # G1WalkConfig.warp_box_box's values
WARP_COMPILE_VIA = ("threads", "processes")  # G1WalkConfig.warp_compile_via's values
SOLVERS = ("newton", "cg")  # G1WalkConfig.solver's values: the constraint solvers MuJoCo Warp has too
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
    action_rate: float = -0.01  # L2 of the change of every joint's action since the last policy step
    # L2 of the leg joints' velocities (hip, knee, ankle: the 12 joints the walking gate's smoothness
    # lines measure); 0 in every recipe but smooth_gait_config
    joint_vel: float = 0.0
    termination: float = -200.0
    # gait clock terms (see G1WalkConfig.gait_period_s); 0 unless the clock is on
    gait_contact: float = 0.0
    feet_swing_height: float = 0.0


@dataclass(frozen=True)
class RewardRamp:
    """A reward weight that changes during training (a curriculum term): ``rewards.<term>`` until the
    env has taken ``start_step`` steps, then linearly to ``weight`` at ``end_step``, then held.
    ``start_step == end_step`` switches at once (Isaac Lab's ``modify_reward_weight``).

    Steps count calls of the vectorized env's ``step`` (Isaac Lab's ``common_step_counter``), so a
    PPO iteration is ``num_steps_per_env`` of them whatever the number of envs; the Runner's
    normalizer warm-up (one rollout before the first iteration) counts too.
    """

    term: str
    weight: float
    start_step: int
    end_step: int

    def weight_at(self, base: float, step: int) -> float:
        """The term's weight after ``step`` env steps, starting from ``base`` (the configured weight)."""
        if step <= self.start_step:
            return base
        if step >= self.end_step:
            return self.weight
        return base + (self.weight - base) * (step - self.start_step) / (self.end_step - self.start_step)


def _as_ramp(item: object) -> RewardRamp:
    """``item`` as a :class:`RewardRamp`: one already, or a mapping of its four fields."""
    if isinstance(item, RewardRamp):
        return item
    fields_ = ("term", "weight", "start_step", "end_step")
    if not (isinstance(item, dict) and set(item) == set(fields_)):
        raise ValueError(f"reward_ramps: each ramp is {{term, weight, start_step, end_step}}, got {item!r}")
    numbers = [item[k] for k in fields_[1:]]
    if not isinstance(item["term"], str) or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in numbers):
        raise ValueError(f"reward_ramps: term is a reward term's name, weight, start_step and end_step numbers; got {item!r}")
    return RewardRamp(**item)


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
    # keep the model file's own sensors (IMU readings the task never reads; see assets.build_g1_model):
    # the dynamics are bit-identical either way, only the cost of a substep differs
    model_file_sensors: bool = False
    # the model file's contact pairs between the robot's own bodies (legs, hands, torso), on every
    # simulator (Isaac Lab: isaaclab.robot.author_self_collisions); False keeps only those with the
    # floor, as Isaac Lab's own G1 collides (see assets.build_g1_model)
    model_self_collisions: bool = True
    physics_threads: int = 0  # CPU backends: worker threads, 0 for every core
    sim_dt: float = 0.005
    decimation: int = 4
    # MuJoCo's constraint solver budget per substep (opt.iterations, opt.ls_iterations); None keeps
    # the model file's (menagerie_mjx: 5 and 8; menagerie: 100 and 50; playground_feetonly: 3 and
    # 5). With sim_dt and decimation they set the cost of a policy step: e.g. sim_dt 0.004 x
    # decimation 5 keeps the 50 Hz policy with a shorter step, which may need fewer iterations.
    # Isaac Lab's G1WalkDirectEnv passes them on when set (by default its solver converges: 100 and 50).
    solver_iterations: int | None = None
    ls_iterations: int | None = None
    # MuJoCo's constraint solver (opt.solver): "newton" or "cg"; None keeps the model file's (Newton
    # for every variant). CG needs more iterations than Newton for the same step (about 20 against
    # Newton's 5 for the gate's policy, benchmarks/physics_settings.py) but has no Hessian to
    # factor: on MuJoCo Warp its solver compiles without the Cholesky kernels, the slowest of a cold build.
    solver: str | None = None
    # MuJoCo Warp's buffers: contacts per world (pooled over the worlds) and constraint rows per
    # world (a hard limit per world); None sizes both for every contact and limit at once
    # (backends.mujoco_warp.contact_capacity: 102 and 292 for the G1, of which about 5 and 85 are
    # used). They set the size of the collision and solver launches; an overflow stops training
    # with the health check's error naming the envs, never drops contacts silently.
    warp_nconmax: int | None = None
    warp_njmax: int | None = None
    # how MuJoCo Warp collides the two foot boxes: "primitive" (MuJoCo's box-box algorithm, as on
    # the CPU) or "convex" (its general GJK/EPA path: one more kernel, the slowest of a cold build)
    warp_box_box: str = "primitive"
    # compile the Warp modules of the physics step (and on MuJoCo Warp, of its staging and reset
    # programs) this many at a time before they first run (backends.warp_stream.compile_recorded;
    # on Isaac Lab, G1WalkDirectEnv.compile_physics_ahead); 0 leaves it to Warp, which compiles each
    # module at its first launch, one after the other
    warp_compile_workers: int = 0
    # how MuJoCo Warp compiles them: "threads" of this process, or "processes" (N - 1 workers and
    # this one, each taking the next module, through Warp's kernel cache; backends.compile_worker):
    # Warp generates a module's code under one lock per process, so threads overlap only the compiler after it
    warp_compile_via: str = "threads"
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

    # commands [v_x, v_y, w_z], body frame, uniform per env, drawn at every reset (and, with
    # resampling_time_range, again mid-episode). The walking gate (isaac_adapter/evaluation/gate.py)
    # commands v_x 0.8 and -0.5, v_y 0.4, w_z +-1.0 (at v_x 0.3) and standing; each lies inside
    # these ranges with a margin of 0.1 (v_y) to 0.2, since tracking is weakest at a range's edge
    # where few commands were drawn. Until these were widened the ranges were LEGACY_COMMANDS'
    # (which left v_y 0.4 and w_z 1.0 outside and v_x -0.5 on the edge); checkpoints that do not
    # record their config are evaluated with those (registry.checkpoint_walk_config).
    lin_vel_x_range: tuple[float, float] = (-0.7, 1.0)
    lin_vel_y_range: tuple[float, float] = (-0.5, 0.5)
    ang_vel_z_range: tuple[float, float] = (-1.2, 1.2)
    # Share of command draws that are exactly (0, 0, 0), each draw standing with this probability
    # (Isaac Lab's rel_standing_envs): a uniform draw almost never asks to stand still, which the
    # gate's 'stand' command does. 0 draws no extra random numbers, so the random stream is then
    # the one from before this setting existed.
    rel_standing_envs: float = 0.1
    # (min, max) s a command is held before a new one is drawn mid-episode, uniform per env (Isaac
    # Lab's velocity tasks use (10, 10)); None: commands change only at a reset. The task's
    # episodes are 20 s; a draw at 10 s teaches the change of pace the command battery does not
    # test. Off by default: on, it draws random numbers every step, a different stream from off.
    resampling_time_range: tuple[float, float] | None = None

    # observation scales (keep inputs O(1))
    obs_ang_vel_scale: float = 0.25
    obs_joint_vel_scale: float = 0.05
    obs_torque_scale: float = 0.02
    # The policy sees its last policy_obs_frames frames, newest first: the current observation and
    # the ones it acted on before, noisy as they were seen, so that it can average sensor noise out
    # and sense a delayed action. Until an episode has that many, the missing frames repeat its
    # first. The critic sees the current frame only (asymmetric actor-critic). 1: no history.
    policy_obs_frames: int = 1

    # reward shaping
    tracking_sigma: float = 0.25  # exp(-err^2 / sigma)
    air_time_threshold: float = 0.4  # s, cap on the single-stance time rewarded
    rewards: RewardWeights = field(default_factory=RewardWeights)
    # Reward weights that move during training, one RewardRamp per term (e.g. action_rate from the
    # recipe's -0.01 to -0.15 once the robots walk: the smoothness the walking gate asks for, added
    # after the gait is learnt, as the fine-tune of the gate-passing checkpoint did by hand).
    # From the command line: env.reward_ramps='[{term: action_rate, weight: -0.15, start_step: 3600, end_step: 7200}]'.
    reward_ramps: tuple[RewardRamp, ...] = ()

    # Optional gait clock: a phase that restarts with every episode and runs one cycle per
    # gait_period_s; (sin, cos) of it is appended to the policy observation and the gait_contact /
    # feet_swing_height rewards ask each foot to be down for the first gait_stance_fraction of its
    # cycle (legs half a cycle apart) and to swing at swing_height_m. None: no clock (Isaac Lab's
    # G1 recipe). See gait_clock_config().
    gait_period_s: float | None = None
    gait_stance_fraction: float = 0.55
    swing_height_m: float = 0.08  # m, foot body (ankle roll link) height in swing; ~0.03 standing

    # Domain randomization (friction, masses, joint and PD parameters, pushes, observation noise,
    # action delay), off by default; see randomization.RandomizationCfg. From the command line:
    # env.randomization.friction=[0.3,1.2], env.randomization.obs_noise='{ang_vel: 0.2}'.
    randomization: RandomizationCfg = field(default_factory=RandomizationCfg)

    def __post_init__(self) -> None:
        # dicts from a YAML override or a stored config
        self.reward_ramps = tuple(_as_ramp(r) for r in self.reward_ramps)
        self.randomization = as_randomization(self.randomization)
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
        for name in ("solver_iterations", "ls_iterations", "warp_nconmax", "warp_njmax"):
            value = getattr(self, name)
            if value is not None and not (int(value) == value and value > 0):
                raise ValueError(f"{name} must be a positive integer or None, got {value}")
        if not (int(self.warp_compile_workers) == self.warp_compile_workers and self.warp_compile_workers >= 0):
            raise ValueError(f"warp_compile_workers must be an integer >= 0, got {self.warp_compile_workers}")
        if self.warp_compile_via not in WARP_COMPILE_VIA:
            raise ValueError(f"warp_compile_via must be one of {', '.join(WARP_COMPILE_VIA)}, "
                             f"got {self.warp_compile_via!r}")
        if self.solver is not None and self.solver not in SOLVERS:
            raise ValueError(f"solver must be one of {', '.join(SOLVERS)} (or None: the model file's), "
                             f"got {self.solver!r}")
        if self.warp_box_box not in WARP_BOX_BOX:
            raise ValueError(f"warp_box_box must be one of {', '.join(WARP_BOX_BOX)}, got {self.warp_box_box!r}")
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
        if not isinstance(self.policy_obs_frames, int) or isinstance(self.policy_obs_frames, bool) \
                or self.policy_obs_frames < 1:
            raise ValueError(f"policy_obs_frames must be an integer >= 1 (1: no history), got {self.policy_obs_frames}")
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
            if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
                raise ValueError(f"{name} must be finite (low, high) with low <= high, got {(lo, hi)}")
        if not 0.0 <= self.rel_standing_envs <= 1.0:
            raise ValueError(f"rel_standing_envs must be in [0, 1], got {self.rel_standing_envs}")
        if self.resampling_time_range is not None:
            lo, hi = self.resampling_time_range
            if not (0 < lo <= hi and math.isfinite(hi)):
                raise ValueError(f"resampling_time_range must be None or (min, max) s, 0 < min <= max; got {(lo, hi)}")
        for name in ("solver_iterations", "ls_iterations"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or int(value) != value or value < 1):
                raise ValueError(f"{name} must be None (the model file's) or a positive integer, got {value}")
        if self.randomization.obs_noise.get("clock", 0.0) > 0 and self.gait_period_s is None:
            raise ValueError("randomization.obs_noise.clock: this task has no gait clock (gait_period_s is None)")
        terms = [r.term for r in self.reward_ramps]
        for ramp in self.reward_ramps:
            if ramp.term not in RewardWeights.__dataclass_fields__:
                raise ValueError(f"reward_ramps: no reward term {ramp.term!r}; terms: {', '.join(RewardWeights.__dataclass_fields__)}")
            if terms.count(ramp.term) > 1:
                raise ValueError(f"reward_ramps: {ramp.term!r} has more than one ramp")
            if not (0 <= ramp.start_step <= ramp.end_step and math.isfinite(ramp.weight)):
                raise ValueError(f"reward_ramps: {ramp.term!r} needs 0 <= start_step <= end_step and a finite "
                                 f"weight, got start_step {ramp.start_step}, end_step {ramp.end_step}, weight {ramp.weight}")

    def reward_weights(self, step: int) -> dict[str, float]:
        """Every reward term's weight after ``step`` env steps: :attr:`rewards`, moved by :attr:`reward_ramps`."""
        weights = {name: getattr(self.rewards, name) for name in RewardWeights.__dataclass_fields__}
        for ramp in self.reward_ramps:
            weights[ramp.term] = ramp.weight_at(weights[ramp.term], step)
        return weights

    def reward_ramp_table(self) -> list[list[float]]:
        """The weight schedule as four rows over the terms of :class:`RewardWeights` (in field
        order): the configured weight, the weight the ramp ends at, the step it starts after and its
        length in steps (at least 1). A term without a ramp ends where it starts. What
        ``terms.ramped_weights`` reads on the device; :meth:`reward_weights` is the same schedule in
        Python numbers."""
        names = list(RewardWeights.__dataclass_fields__)
        base = [float(getattr(self.rewards, name)) for name in names]
        target, start, span = list(base), [0.0] * len(names), [1.0] * len(names)
        for ramp in self.reward_ramps:
            i = names.index(ramp.term)
            target[i], start[i] = float(ramp.weight), float(ramp.start_step)
            span[i] = float(max(ramp.end_step - ramp.start_step, 1))  # a switch: 0 up to start_step, 1 after
        return [base, target, start, span]


#: The command settings every checkpoint trained before the ranges were widened used (the standing
#: share and mid-episode resampling did not exist): what a checkpoint that does not record its
#: config is evaluated with, so that the figures published for it stay reproducible.
LEGACY_COMMANDS: dict = dict(
    lin_vel_x_range=(-0.5, 1.0),
    lin_vel_y_range=(-0.3, 0.3),
    ang_vel_z_range=(-0.5, 0.5),
    rel_standing_envs=0.0,
    resampling_time_range=None,
)


#: What a checkpoint that does not record ``warp_box_box`` trained with: every one before the field
#: existed that trained on MuJoCo Warp collided the feet by its convex path.
LEGACY_BACKEND: dict = dict(warp_box_box="convex")


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


def smooth_gait_config(
    period_s: float = 0.8,
    *,
    action_rate: float = -0.08,
    ang_vel_xy: float = -0.2,
    joint_vel: float = -1.0e-3,
    **overrides,
) -> G1WalkConfig:
    """The gait-clock task (:func:`gait_clock_config`) with stronger smoothness penalties from the
    first step. In the from-scratch GPU runs measured (16,384 envs, up to 320 iterations, BENCHMARKS.md
    "Time to walk") it learnt to stand, not to walk; :func:`clock_ramp_config` adds such penalties
    once the gait is learnt and passes the gate.

    The shipped clock policy fails the gate's smoothness lines on leg action change (0.35 units per
    step RMS against <= 0.21) and body roll/pitch rate (0.217 rad/s against <= 0.21); these weights
    aim at exactly those: ``action_rate`` 8x the default's -0.01 (legged-robot recipes use -0.01 to
    -0.1), ``ang_vel_xy`` 4x the default's -0.05, and a small ``joint_vel`` (leg joints, as Unitree's
    G1 recipe's -1e-3) against fast leg swings. Every other weight, the commands (the widened ranges,
    standing share) and the physics are the clock task's. Each weight is a keyword here; any other
    field goes through ``overrides``.
    """
    cfg = gait_clock_config(period_s, **overrides)
    cfg.rewards = replace(cfg.rewards, action_rate=action_rate, ang_vel_xy=ang_vel_xy, joint_vel=joint_vel)
    return cfg


#: The smoothness ramps of :func:`clock_ramp_config`: from the clock task's weights (action_rate
#: -0.01, ang_vel_xy -0.05) to the fine-tune's that passed the gate, over env steps 12,000-19,200
#: (PPO iterations 500-800 at 24 steps per iteration, the normalizer warm-up rollout counted).
CLOCK_SMOOTHNESS_RAMPS: tuple[RewardRamp, ...] = (
    RewardRamp("action_rate", -0.15, 12_000, 19_200),
    RewardRamp("ang_vel_xy", -0.2, 12_000, 19_200),
)


def clock_ramp_config(period_s: float = 0.8, **overrides) -> G1WalkConfig:
    """The gait-clock task (:func:`gait_clock_config`) with its smoothness penalties ramped in after
    the gait is learnt (:data:`CLOCK_SMOOTHNESS_RAMPS`): the from-scratch recipe that passes the
    walking gate (BENCHMARKS.md, "Time to walk").

    At 4,096 envs the clock task tracks the gate's whole command battery from about iteration 240
    and passed gait acceptance at 500; from 500 the penalties rise to the weights of the fine-tune
    that first passed the gate. ``reward_ramps`` in ``overrides`` replaces the ramps.
    """
    overrides.setdefault("reward_ramps", CLOCK_SMOOTHNESS_RAMPS)
    return gait_clock_config(period_s, **overrides)


#: The ramps of :func:`clock_fast_config`: the weights of :data:`CLOCK_SMOOTHNESS_RAMPS` over env
#: steps 6,000-13,200 (iterations 250-550 at 24 steps per iteration). The robots track the gate's
#: whole command battery from about iteration 240, so the smoothness penalties need not wait for 500.
EARLY_SMOOTHNESS_RAMPS: tuple[RewardRamp, ...] = (
    RewardRamp("action_rate", -0.15, 6_000, 13_200),
    RewardRamp("ang_vel_xy", -0.2, 6_000, 13_200),
)


def clock_fast_config(period_s: float = 0.8, **overrides) -> G1WalkConfig:
    """The time-to-walk recipe: the gait-clock task trained on 10 ms x 2 physics steps (the policy
    still acts every 20 ms) with :data:`EARLY_SMOOTHNESS_RAMPS`.

    The physics step costs half the reference's (5 ms x 4) on a GPU; the gate still judges every
    checkpoint on the reference physics (sim-to-sim, ``evaluation.gate.REFERENCE_PHYSICS``). At 4,096
    envs on one H200 three seeds passed the gate at 41-71M samples (BENCHMARKS.md, "Time to walk").
    ``sim_dt``, ``decimation`` and ``reward_ramps`` in ``overrides`` replace the recipe's.
    """
    overrides.setdefault("sim_dt", 0.01)
    overrides.setdefault("decimation", 2)
    overrides.setdefault("reward_ramps", EARLY_SMOOTHNESS_RAMPS)
    return gait_clock_config(period_s, **overrides)


#: The env steps of one PPO iteration in ``G1-Walk-Clock-Fast-v1`` and ``-v2`` (4,096 envs x 12: half
#: the samples of the 24-step iterations the other recipes use).
FAST_V1_STEPS_PER_ITERATION = 12

#: The ramps of :func:`clock_fast_v1_config`: :data:`EARLY_SMOOTHNESS_RAMPS` at the same iterations
#: (250-550), so at half their env steps (3,000-6,600), since those count 24-step iterations.
FAST_V1_RAMPS: tuple[RewardRamp, ...] = tuple(
    replace(r, start_step=round(r.start_step * FAST_V1_STEPS_PER_ITERATION / 24),
            end_step=round(r.end_step * FAST_V1_STEPS_PER_ITERATION / 24))
    for r in EARLY_SMOOTHNESS_RAMPS)

#: The ramps of :func:`clock_fast_v2_config`: :data:`FAST_V1_RAMPS` with the roll/pitch rate penalty
#: ``ang_vel_xy`` ramped to -0.4 instead of -0.2 (the gate's slowest line to pass is roll/pitch rate).
FAST_V2_RAMPS: tuple[RewardRamp, ...] = tuple(
    replace(r, weight=-0.4) if r.term == "ang_vel_xy" else r for r in FAST_V1_RAMPS)


def clock_fast_v1_config(period_s: float = 0.8, **overrides) -> G1WalkConfig:
    """:func:`clock_fast_config` for 12-step iterations, with :data:`FAST_V1_RAMPS`.

    With half the samples per iteration and twice the KL target (the task's agent settings,
    ``registry``), three seeds passed the gate at 20.6-21.6M samples on one H200, against 37-71M for
    every recipe before (BENCHMARKS.md, "Half the samples per iteration"). ``reward_ramps`` in
    ``overrides`` replaces the ramps.
    """
    overrides.setdefault("reward_ramps", FAST_V1_RAMPS)
    return clock_fast_config(period_s, **overrides)


def clock_fast_v2_config(period_s: float = 0.8, **overrides) -> G1WalkConfig:
    """:func:`clock_fast_v1_config` with :data:`FAST_V2_RAMPS`: the roll/pitch rate penalty ends at
    twice v1's weight. On one H200 its runs needed a median 400 iterations to the gate against v1's
    460, and seeds 0-6, each alone (three runs), passed in a median 47.9 s of samples / steady rate,
    6 of 7 within 60 s (BENCHMARKS.md, "``G1-Walk-Clock-Fast-v2``"). ``reward_ramps`` in
    ``overrides`` replaces the ramps.
    """
    overrides.setdefault("reward_ramps", FAST_V2_RAMPS)
    return clock_fast_v1_config(period_s, **overrides)


def robust_config(period_s: float = 0.8, **overrides) -> G1WalkConfig:
    """:func:`clock_fast_v2_config` with the domain randomization a G1 owner would train a policy for
    the real robot with (:func:`~.randomization.robust_randomization`). ``randomization`` in
    ``overrides`` replaces it."""
    overrides.setdefault("randomization", robust_randomization())
    return clock_fast_v2_config(period_s, **overrides)


#: The kicks of ``G1-Walk-Robust-v1``: every 2-4 s, as often as the robustness gate kicks. Trained on
#: Isaac Lab so (seed 1), the robustness gate passed at gate seeds 0-4 with 1 fall in 120 rollouts;
#: at v0's 5-10 s, 9 falls and 1 seed of 5 (BENCHMARKS.md, "The robust task").
ROBUST_V1_PUSH_INTERVAL_S = (2.0, 4.0)
#: The observation frames of ``G1-Walk-Robust-v1``'s policy: the noise costs a one-frame policy body
#: rate it cannot filter (BENCHMARKS.md, "The robust task": the observation history).
ROBUST_V1_POLICY_OBS_FRAMES = 3


def robust_v1_config(period_s: float = 0.8, **overrides) -> G1WalkConfig:
    """:func:`robust_config` as it passed both gates trained on Isaac Lab (one training seed): kicks
    every :data:`ROBUST_V1_PUSH_INTERVAL_S` s and :data:`ROBUST_V1_POLICY_OBS_FRAMES` observation
    frames; every other range is v0's."""
    overrides.setdefault("randomization", replace(robust_randomization(), push_interval_s=ROBUST_V1_PUSH_INTERVAL_S))
    overrides.setdefault("policy_obs_frames", ROBUST_V1_POLICY_OBS_FRAMES)
    return robust_config(period_s, **overrides)


def clock_cpu_config(period_s: float = 0.8, **overrides) -> G1WalkConfig:
    """The CPU recipe's task: :func:`clock_fast_v2_config` with the gait clock's contact match at
    twice its weight (0.36 per foot against :func:`gait_clock_config`'s 0.18). On MuJoCo Warp at the
    CPU recipe's 1,024 envs, seed 1 with it stepped from 4.0M samples and passed the gait acceptance
    at 10.4M; the same seed without it stepped from 5.2M and was still 0.004 m/s short on tracking
    at 10.8M (BENCHMARKS.md, "Time to walk on a 2-core CPU")."""
    cfg = clock_fast_v2_config(period_s, **overrides)
    cfg.rewards = replace(cfg.rewards, gait_contact=0.36)
    return cfg


#: The named task variants (registry.TaskSpec.preset), each a function of ``**overrides``.
PRESETS = {"default": G1WalkConfig, "gait_clock": gait_clock_config, "smooth_gait": smooth_gait_config,
           "clock_ramp": clock_ramp_config, "clock_fast": clock_fast_config, "clock_fast_v1": clock_fast_v1_config,
           "clock_fast_v2": clock_fast_v2_config, "robust": robust_config, "robust_v1": robust_v1_config,
           "clock_cpu": clock_cpu_config}


def walk_config(gait_clock: bool = False, preset: str | None = None, **overrides) -> G1WalkConfig:
    """The task variant ``preset`` (a key of :data:`PRESETS`); without one, the default task or with
    ``gait_clock`` its gait-clock variant (:func:`gait_clock_config`)."""
    if preset is None:
        preset = "gait_clock" if gait_clock else "default"
    if preset not in PRESETS:
        raise ValueError(f"unknown G1 walk preset {preset!r}; choose from {sorted(PRESETS)}")
    return PRESETS[preset](**overrides)


# fields of a stored config that say where and how many, not what the task is
_RUNTIME_FIELDS = ("num_envs", "device", "seed", "physics_threads")


def stored_config(params: dict, preset: str | None = None, **overrides) -> G1WalkConfig:
    """The task a checkpoint recorded (``params``: ``dataclasses.asdict`` of its config, possibly
    from an older version of it), for evaluation or further training.

    ``preset`` (a key of :data:`PRESETS`) supplies what ``params`` lacks; the recorded fields win
    over it, except the runtime ones (``num_envs``, ``device``, ``seed``, ``physics_threads``), and
    ``overrides`` win over both. Command settings ``params`` does not record take their
    :data:`LEGACY_COMMANDS` values (an empty ``params``, a checkpoint that recorded nothing, so gets
    the old ranges), and the feet's collider its :data:`LEGACY_BACKEND` one; fields this version does
    not know are dropped.
    """
    known = set(G1WalkConfig.__dataclass_fields__)
    recorded = {k: v for k, v in params.items() if k in known and k not in _RUNTIME_FIELDS}
    for name in ("lin_vel_x_range", "lin_vel_y_range", "ang_vel_z_range", "resampling_time_range"):
        if isinstance(recorded.get(name), list):  # a config read back from YAML or JSON
            recorded[name] = tuple(recorded[name])
    if isinstance(recorded.get("randomization"), dict):  # __post_init__ reads it; ranges back to tuples
        recorded["randomization"] = as_randomization(recorded["randomization"])
    if isinstance(recorded.get("rewards"), dict):
        weights = {k: v for k, v in recorded["rewards"].items() if k in RewardWeights.__dataclass_fields__}
        recorded["rewards"] = RewardWeights(**weights)  # weights added since keep their defaults (0)
    # replace() validates the result again
    return replace(walk_config(preset=preset), **{**LEGACY_COMMANDS, **LEGACY_BACKEND, **recorded, **overrides})
