"""The gate: a command battery and smoothness limits a walking checkpoint must meet, beside the gait
acceptance of :mod:`.gait` (which it does not change).

One seeded rollout (:meth:`~.evaluator.Evaluator.rollout`) holds every env on its own fixed command:
``starts`` envs per battery command, then ``starts`` envs at the smoothness command. Every metric is
taken over each env's first-done window (:mod:`.trace`), like the rest of the evaluator. ``T`` steps,
``N`` envs, ``A`` actions, ``J`` joints, ``L`` leg joints.

Definitions (the choices the gate's wording leaves open):

* Battery: forward ``(0.8, 0, 0)``, backward ``(-0.5, 0, 0)``, turn left ``(0.3, 0, +1.0)``, turn right
  ``(0.3, 0, -1.0)``, strafe ``(0, 0.4, 0)`` (to the left only; -0.4 is not run), stand ``(0, 0, 0)``;
  ``(v_x, v_y, w_z)`` in the body frame, m/s and rad/s.
* Noisy starts: ``starts`` (4) envs per command of one reset seeded with ``seed``: each env draws its
  own spawn joint noise (the task's ``joint_pos_noise``, uniform) from the task's generator.
* Falls: envs of the battery that fell under the task's evaluation thresholds (0.60 m, tilt, lateral
  velocity; :func:`~.judge.judge_falls`); timeouts are not falls. Pass: at most ``max_falls`` (1).
* Tracking perf: mean of ``exp(-|v_xy - cmd_xy|^2 / sigma)`` (sigma 0.25 m^2/s^2, body frame) over
  every window step of every battery env, pooled (not a mean of per-command means).
* Smoothness, over the ``starts`` envs at ``(0.5, 0, 0)``, pooled over window steps, envs and components:

  - action change: RMS of ``a_t - a_{t-1}`` over the 12 leg joints (hip, knee, ankle;
    :data:`~.g1_probe.LEG_JOINT_KEYS`), in policy action units (one unit = ``action_scale`` rad),
    over consecutive pairs of steps inside the window (the first step, whose predecessor is the
    reset, is not a pair);
  - roll/pitch rate: RMS of the tilt-rate magnitude ``|(w_x, w_y)|`` of the body-frame root angular
    velocity (rad/s), i.e. ``sqrt(mean(w_x^2 + w_y^2))``: one physical quantity, the one the task's
    ``ang_vel_xy`` penalty squares, and the definition the gate's 0.21 limit was measured with (the
    RMS per component would be ``1/sqrt(2)`` of it);
  - yaw-rate error: RMS of ``w_z - cmd_wz`` (rad/s);
  - leg joint velocity: RMS of the 12 leg joint velocities (rad/s).

The robustness gate (:func:`robust_gate_config`) is the same battery, rollout and judgment (the same
lines and thresholds) with the task's domain randomization on
(:class:`~isaac_adapter.tasks.g1_walk.randomization.RandomizationCfg`, one definition for training and
judging): :data:`ROBUST_GATE_RANDOMIZATION`'s pushes, friction, masses, observation noise and a
one-step action delay. Falls count throughout; tracking and smoothness are judged outside the
:data:`ROBUST_GATE_RECOVERY_S` after each kick. The walking gate judges with the randomization
off, whatever the checkpoint trained with.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import torch

from ppo_bootstrap.env import VecEnv
from ppo_bootstrap.progress import Progress

from isaac_adapter.evaluation.evaluator import EvalConfig, Evaluator, EvalPolicy, EvalReport
from isaac_adapter.evaluation.gait import walking_means
from isaac_adapter.evaluation.g1_probe import G1WalkProbe, judged_walk_config
from isaac_adapter.evaluation.judge import FALL, FallJudgement, ThresholdSet, judge_falls
from isaac_adapter.evaluation.trace import RolloutTrace
from isaac_adapter.tasks.g1_walk.causes import CAUSE_NAMES
from isaac_adapter.tasks.g1_walk.randomization import RandomizationCfg

Command = tuple[float, float, float]

BATTERY: tuple[tuple[str, Command], ...] = (
    ("forward 0.8", (0.8, 0.0, 0.0)),
    ("backward -0.5", (-0.5, 0.0, 0.0)),
    ("turn left", (0.3, 0.0, 1.0)),
    ("turn right", (0.3, 0.0, -1.0)),
    ("strafe 0.4", (0.0, 0.4, 0.0)),
    ("stand", (0.0, 0.0, 0.0)),
)


@dataclass(frozen=True)
class GateThresholds:
    """Limits of the gate (module docstring): falls and tracking over the battery, smoothness limits."""

    max_falls: int = 1
    min_tracking_perf: float = 0.90
    tracking_sigma: float = 0.25
    max_action_change_rms: float = 0.21
    max_roll_pitch_rate_rms: float = 0.21
    max_yaw_rate_error_rms: float = 0.20
    max_leg_joint_vel_rms: float = 1.22


@dataclass(frozen=True)
class GateConfig:
    """How the gate runs: ``starts`` noisy starts per command, ``horizon_s`` each, one reset seeded with ``seed``."""

    starts: int = 4
    horizon_s: float = 20.0
    seed: int = 0
    battery: tuple[tuple[str, Command], ...] = BATTERY
    smoothness_command: Command = (0.5, 0.0, 0.0)
    thresholds: GateThresholds = field(default_factory=GateThresholds)
    # the task's domain randomization during the rollout: off for the walking gate, on for the
    # robustness gate (robust_gate_config)
    randomization: RandomizationCfg = field(default_factory=RandomizationCfg)
    # s after each push left out of the tracking and smoothness lines (falls count throughout): a
    # kick's velocity change and the steps that recover from it are the push, not the policy's gait
    recovery_s: float = 0.0
    name: str = "gate"

    @property
    def num_envs(self) -> int:
        """Envs of the one rollout: ``starts`` per battery command, plus ``starts`` for smoothness."""
        return self.starts * (len(self.battery) + 1)

    def commands(self, num_envs: int | None = None) -> torch.Tensor:
        """``[num_envs, 3]``: each battery command ``starts`` times, then the smoothness command; an env
        built with more envs than the gate's (``num_envs``) holds the smoothness command in the rest,
        which the gate does not judge."""
        rows = [c for _, c in self.battery] + [self.smoothness_command]
        gate = torch.tensor(rows, dtype=torch.float32).repeat_interleave(self.starts, dim=0)
        extra = 0 if num_envs is None else num_envs - self.num_envs
        if extra < 0:
            raise ValueError(f"the gate runs {self.num_envs} envs, the env has {num_envs}")
        return torch.cat([gate, gate[-1:].expand(extra, 3)])


# -- metrics: pure functions of traces ----------------------------------------------------------


def masked_rms(values: torch.Tensor, window: torch.Tensor) -> float:
    """RMS of ``values`` ``[T, N, K]`` over the steps in ``window`` ``[T, N]`` bool, pooled over N and K."""
    w = window.unsqueeze(-1).to(values.dtype)
    count = w.sum() * values.shape[-1]
    return math.sqrt(float((values.square() * w).sum() / count.clamp_min(1.0)))


def action_change_rms(action: torch.Tensor, window: torch.Tensor) -> float:
    """RMS of ``a_t - a_{t-1}`` (``action`` ``[T, N, A]``) over pairs with both steps in ``window`` ``[T, N]``."""
    return masked_rms(action[1:] - action[:-1], window[1:] & window[:-1])


def roll_pitch_rate_rms(ang_vel_b: torch.Tensor, window: torch.Tensor) -> float:
    """RMS of the tilt-rate magnitude ``|(w_x, w_y)|`` (``ang_vel_b`` ``[T, N, 3]``, body frame), rad/s."""
    return masked_rms(ang_vel_b[..., :2].norm(dim=-1, keepdim=True), window)


def yaw_rate_error_rms(ang_vel_b: torch.Tensor, command: torch.Tensor, window: torch.Tensor) -> float:
    """RMS of ``w_z - cmd_wz`` (``ang_vel_b``, ``command`` ``[T, N, 3]``), rad/s."""
    return masked_rms((ang_vel_b[..., 2] - command[..., 2]).unsqueeze(-1), window)


def tracking_perf(lin_vel_b: torch.Tensor, command: torch.Tensor, window: torch.Tensor, sigma: float) -> float:
    """Mean of ``exp(-|v_xy - cmd_xy|^2 / sigma)`` over every window step of every env (``[T, N, 3]`` inputs)."""
    err2 = (lin_vel_b[..., :2] - command[..., :2]).square().sum(-1)
    w = window.to(err2.dtype)
    return float((torch.exp(-err2 / sigma) * w).sum() / w.sum().clamp_min(1.0))


def after_recovery(pushed: torch.Tensor, steps: int) -> torch.Tensor:
    """``[T, N]`` bool: the steps with no kick in themselves or the ``steps - 1`` before them
    (``pushed`` ``[T, N]`` bool, a kick during that step). ``steps <= 0``: every step."""
    if steps <= 0:
        return torch.ones_like(pushed, dtype=torch.bool)
    kicks = pushed.long().cumsum(0)
    before = torch.cat([torch.zeros_like(kicks[:steps]), kicks])[: kicks.shape[0]]  # kicks up to step t - steps
    return kicks == before


def env_window(trace: RolloutTrace, envs: slice) -> torch.Tensor:
    """``[T, N]`` bool: the first-done window of the envs in ``envs`` only."""
    window = trace.window()
    keep = torch.zeros(trace.num_envs, dtype=torch.bool)
    keep[envs] = True
    return window & keep


# -- the gate ----------------------------------------------------------------------------------


@dataclass
class GateLine:
    """One line of the gate: ``value`` compared with ``threshold`` by ``op`` (``"<="`` or ``">="``)."""

    name: str
    value: float
    threshold: float
    op: str

    @property
    def passed(self) -> bool:
        return self.value <= self.threshold if self.op == "<=" else self.value >= self.threshold

    def text(self, value: float) -> str:
        """``value`` (this line's measure or its threshold) as the tables print it: falls whole."""
        return f"{value:.0f}" if self.name.startswith("falls") else f"{value:.3f}"


@dataclass
class GateResult:
    """The gate's lines, and per battery command ``{name: {"falls", "tracking_perf"}}`` for the record;
    ``falls``: what :func:`fall_details` says of each battery fall."""

    lines: list[GateLine]
    per_command: dict[str, dict[str, float]]
    smoothness_falls: int
    config: GateConfig
    falls: list[dict[str, Any]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(line.passed for line in self.lines)

    def as_dict(self) -> dict:
        return {"passed": self.passed, "smoothness_falls": self.smoothness_falls, "per_command": self.per_command,
                "lines": [{**asdict(line), "passed": line.passed} for line in self.lines],
                "falls": self.falls, "config": asdict(self.config)}

    def format(self) -> str:
        """The gate table: line, measured value, threshold, PASS / FAIL; then the overall verdict."""
        cfg = self.config
        if cfg.battery:
            out = [f"{cfg.name}: {len(cfg.battery)} commands x {cfg.starts} noisy starts x {cfg.horizon_s:g} s, "
                   f"seed {cfg.seed}; smoothness at {cfg.smoothness_command} ({cfg.starts} starts)"]
        else:  # the gait acceptance: one command
            out = [f"{cfg.name}: {cfg.starts} noisy starts x {cfg.horizon_s:g} s at {cfg.smoothness_command}, "
                   f"seed {cfg.seed}"]
        if cfg.randomization.enabled:
            out.append("randomization: " + describe_randomization(cfg.randomization))
        if cfg.recovery_s > 0:
            out.append(f"tracking and smoothness judged outside the {cfg.recovery_s:g} s after each push; "
                       "falls throughout")
        out += [f"{'line':<34} {'measured':>9} {'threshold':>11}  result", "-" * 64]
        for line in self.lines:
            limit = f"{line.op} {line.text(line.threshold)}"
            out.append(f"{line.name:<34} {line.text(line.value):>9} {limit:>11}  {'PASS' if line.passed else 'FAIL'}")
        out.append("-" * 64)
        out.append(f"{cfg.name:<34} {'':>9} {'':>11}  {'PASS' if self.passed else 'FAIL'}")
        if self.per_command:
            out.append("per command: " + "; ".join(f"{name}: {int(v['falls'])} falls, perf {v['tracking_perf']:.3f}"
                                                  for name, v in self.per_command.items()))
        out += [f"fall: {describe_fall(fall)}" for fall in self.falls]
        if self.smoothness_falls:
            out.append(f"note: {self.smoothness_falls} smoothness env(s) fell; their windows end at the fall")
        return "\n".join(out)


#: What :func:`fall_details` keeps of each fall, in this order (the records of ``g1_gate.py --json``).
FALL_FIELDS = ("command", "env", "cause", "time_s", "since_kick_s", "root_height_m", "lateral_speed_m_s", "tilt_xy")


def fall_details(trace: RolloutTrace, judgement: FallJudgement, envs: slice, commands: list[str]) -> list[dict[str, Any]]:
    """What each fall of ``envs`` was, one dict per fallen env in env order: its command (``commands``
    holds one name per env of ``envs``), the rule that counted it (``cause``: height, tilt, lateral;
    ``train_rule`` where the env's own rule ended it first), when (``time_s``), how long after the
    env's last kick (``since_kick_s``; None without one), and the root height (m), lateral speed
    (m/s) and tilt (``tilt_xy``) at that step: a dip just under the height limit after a kick and a
    collapse read alike in a count of falls."""
    out = []
    end_s = judgement.end_time_s()
    for i, env in enumerate(range(*envs.indices(trace.num_envs))):
        if judgement.outcome[env] != FALL:
            continue
        step = int(judgement.end_step[env])
        kicks = [] if trace.pushed is None else torch.nonzero(trace.pushed[: step + 1, env]).flatten().tolist()
        out.append(dict(zip(FALL_FIELDS, (
            commands[i], env, CAUSE_NAMES[int(judgement.cause[env])], round(float(end_s[env]), 4),
            round((step - kicks[-1]) * trace.dt, 4) if kicks else None,
            round(float(trace.base_height[step, env]), 4), round(abs(float(trace.lateral_vel[step, env])), 4),
            round(float(trace.tilt_xy[step, env]), 4)))))
    return out


def describe_fall(fall: dict[str, Any]) -> str:
    """One fall of :func:`fall_details` in words."""
    kick = "" if fall["since_kick_s"] is None else f", {fall['since_kick_s']:.2f} s after a kick"
    return (f"{fall['command']} (env {fall['env']}): {fall['cause']} at {fall['time_s']:.2f} s{kick}; root "
            f"{fall['root_height_m']:.3f} m, lateral speed {fall['lateral_speed_m_s']:.2f} m/s, tilt {fall['tilt_xy']:.2f}")


def judge_gate(trace: RolloutTrace, rule: ThresholdSet, leg_ids: torch.Tensor, cfg: GateConfig) -> GateResult:
    """Judge a rollout laid out by :meth:`GateConfig.commands` (``trace`` needs ``action`` and ``joint_vel``).

    Args:
        rule: fall thresholds (the task's evaluation rule).
        leg_ids: ``[L]`` indices of the leg joints in the action and joint order.
    """
    if trace.action is None or trace.joint_vel is None:
        raise ValueError("the gate needs a trace with actions and joint velocities (the G1 probe records them)")
    th, k = cfg.thresholds, cfg.starts
    judgement = judge_falls(trace, rule)
    fell = judgement.outcome == FALL
    battery = slice(0, k * len(cfg.battery))
    if cfg.recovery_s > 0 and trace.pushed is None:
        raise ValueError("recovery_s needs a trace that records the pushes (a task with pushes)")
    calm = (after_recovery(trace.pushed, round(cfg.recovery_s / trace.dt)) if cfg.recovery_s > 0
            else torch.ones_like(trace.terminated))

    def judged(envs: slice) -> torch.Tensor:  # tracking and smoothness: the first episode, outside recoveries
        return env_window(trace, envs) & calm

    per_command = {}
    for i, (name, _) in enumerate(cfg.battery):
        envs = slice(i * k, (i + 1) * k)
        per_command[name] = {"falls": int(fell[envs].sum()),
                             "tracking_perf": tracking_perf(trace.lin_vel_b, trace.command, judged(envs),
                                                            th.tracking_sigma)}
    smooth = slice(battery.stop, battery.stop + k)
    window = judged(smooth)
    lines = [
        GateLine("falls (battery, all starts)", float(fell[battery].sum()), th.max_falls, "<="),
        GateLine("tracking perf (battery)", tracking_perf(trace.lin_vel_b, trace.command, judged(battery),
                                                          th.tracking_sigma), th.min_tracking_perf, ">="),
        GateLine("leg action change RMS (units)", action_change_rms(trace.action[..., leg_ids], window),
                 th.max_action_change_rms, "<="),
        GateLine("roll/pitch rate RMS (rad/s)", roll_pitch_rate_rms(trace.ang_vel_b, window),
                 th.max_roll_pitch_rate_rms, "<="),
        GateLine("yaw-rate error RMS (rad/s)", yaw_rate_error_rms(trace.ang_vel_b, trace.command, window),
                 th.max_yaw_rate_error_rms, "<="),
        GateLine("leg joint velocity RMS (rad/s)", masked_rms(trace.joint_vel[..., leg_ids], window),
                 th.max_leg_joint_vel_rms, "<="),
    ]
    names = [name for name, _ in cfg.battery for _ in range(k)]
    return GateResult(lines, per_command, int(fell[smooth].sum()), cfg, fall_details(trace, judgement, battery, names))


def run_gate(probe: G1WalkProbe, policy: EvalPolicy, cfg: GateConfig | None = None, progress: Progress = False) -> GateResult:
    """Roll ``policy`` out once on ``probe``'s env and judge the gate. The env has
    :attr:`GateConfig.num_envs` envs, or more, as an env built for training does (an Isaac Lab env
    cannot be rebuilt in its process): the gate judges the first ``num_envs``."""
    cfg = cfg or GateConfig()
    commands = cfg.commands(probe.env.num_envs)
    evaluator = Evaluator(probe, EvalConfig(horizon_s=cfg.horizon_s, seed=cfg.seed, commands=commands), progress)
    return judge_gate(evaluator.rollout(policy), probe.evaluation_rule, probe.leg_joint_ids, cfg)


#: The robustness gate's randomization: kicks of up to 0.5 m/s per planar axis every 2-4 s, foot
#: friction 0.4-1.2, every link's mass +-10 %, the policy observation noise of Isaac Lab's and mjlab's
#: velocity tasks, and the physics one policy step behind the policy in every env.
ROBUST_GATE_RANDOMIZATION = RandomizationCfg(
    friction=(0.4, 1.2),
    link_mass_scale=(0.9, 1.1),
    push_interval_s=(2.0, 4.0),
    push_velocity=(-0.5, 0.5),
    obs_noise={"ang_vel": 0.2, "gravity": 0.05, "joint_pos": 0.01, "joint_vel": 1.5},
    action_delay_steps=(1, 1),
)


#: s after each kick the robustness gate leaves out of its tracking and smoothness lines: about one
#: gait cycle (the clock tasks' 0.8 s) and a step to catch the robot. Without it a 0.5 m/s kick
#: every 2-4 s alone costs about 0.1 of tracking perf even standing still (0.906 measured).
ROBUST_GATE_RECOVERY_S = 1.0


#: The robustness gate's randomization in parts, each the fields of :data:`ROBUST_GATE_RANDOMIZATION`
#: it keeps: ``robust_gate_config(only=...)`` judges a policy under some of them, to find which one
#: breaks it.
ROBUST_GATE_PARTS = {
    "friction": ("friction",),
    "masses": ("link_mass_scale",),
    "pushes": ("push_interval_s", "push_velocity"),
    "noise": ("obs_noise",),
    "delay": ("action_delay_steps",),
}


def robust_gate_config(only: tuple[str, ...] | None = None, **overrides) -> GateConfig:
    """The robustness gate: the walking gate's battery, lines and thresholds under
    :data:`ROBUST_GATE_RANDOMIZATION` (``randomization`` in ``overrides`` replaces it), tracking
    and smoothness judged outside the :data:`ROBUST_GATE_RECOVERY_S` after each kick.

    ``only``: names of :data:`ROBUST_GATE_PARTS`; the gate keeps those parts of its randomization
    and drops the rest (without the pushes there is no kick to recover from: every step is judged).
    """
    if only is not None:
        unknown = sorted(set(only) - ROBUST_GATE_PARTS.keys())
        if unknown or not only:
            raise ValueError(f"only: the robustness gate's parts are {', '.join(ROBUST_GATE_PARTS)}; "
                             f"got {', '.join(unknown) or 'none'}")
        kept = {name: getattr(ROBUST_GATE_RANDOMIZATION, name) for part in only for name in ROBUST_GATE_PARTS[part]}
        overrides.setdefault("randomization", RandomizationCfg(**kept))
        overrides.setdefault("recovery_s", ROBUST_GATE_RECOVERY_S if "pushes" in only else 0.0)
    overrides.setdefault("randomization", ROBUST_GATE_RANDOMIZATION)
    overrides.setdefault("recovery_s", ROBUST_GATE_RECOVERY_S)
    overrides.setdefault("name", "robust gate")
    return GateConfig(**overrides)


def describe_randomization(cfg: RandomizationCfg) -> str:
    """One line of what ``cfg`` draws: each set range, the noisy terms, the delay."""
    parts = []
    for f in fields(cfg):
        value = getattr(cfg, f.name)
        if f.name == "obs_noise":
            if cfg.noisy:
                parts.append("noise " + ", ".join(f"{k} {v:g}" for k, v in value.items() if v > 0))
        elif f.name == "action_delay_steps":
            if cfg.delayed:
                parts.append(f"delay {value[0]}..{value[1]} steps")
        elif value is not None:
            parts.append(f"{f.name} {value[0]:g}..{value[1]:g}")
    return "; ".join(parts)


#: The physics every checkpoint is judged on, whatever it was trained with: the task's reference
#: (sim_dt 5 ms x 4, the model file's solver and its budget). A policy trained on cheaper physics (say
#: 4 ms x 5, fewer solver iterations, or CG for Newton) would otherwise be judged on that physics, and a
#: changed step size alone moves the roll/pitch line by about 0.01 rad/s for the same policy
#: (benchmarks/physics_settings.py), so a pass could come from the physics rather than the policy.
REFERENCE_PHYSICS = ("sim_dt", "decimation", "solver", "solver_iterations", "ls_iterations")


def gate_task_config(path: str, cfg: GateConfig | None = None, physics_threads: int = 0,
                     physics: dict | None = None):
    """The G1 task the checkpoint at ``path`` is judged on: the one it recorded (gait clock, model
    variant, command settings) at the reference physics (:data:`REFERENCE_PHYSICS`), ``cfg.num_envs``
    envs, its episodes ended no higher than the gate's height line (:func:`~.g1_probe.judged_walk_config`).
    ``physics``: other values of those fields, for studies of the physics itself
    (``benchmarks/physics_settings.py``), never for a verdict."""
    from isaac_adapter.tasks.g1_walk import G1WalkConfig
    from isaac_adapter.tasks.registry import checkpoint_walk_config

    cfg = cfg or GateConfig()
    reference = {name: getattr(G1WalkConfig, name) for name in REFERENCE_PHYSICS}
    task = checkpoint_walk_config(path, num_envs=cfg.num_envs, seed=cfg.seed, physics_threads=physics_threads,
                                  randomization=cfg.randomization, **{**reference, **(physics or {})})
    return judged_walk_config(task)


def gate_checkpoint(path: str, cfg: GateConfig | None = None, physics_threads: int = 0,
                    progress: Progress = False, physics: dict | None = None,
                    make_env: Callable[[Any], VecEnv] | None = None) -> GateResult:
    """Judge the G1-Walk checkpoint at ``path`` (:func:`gate_task_config`) in the env ``make_env``
    builds from that task config; by default the task's own ``G1WalkEnv`` (CPU MuJoCo). An adapted
    env (Isaac Lab's) is probed through the task under it (``env.unwrapped``)."""
    from isaac_adapter.evaluation.evaluator import ActorCriticPolicy

    if make_env is None:
        from isaac_adapter.tasks.g1_walk import G1WalkEnv as make_env  # the task builds its simulator, not this module
    cfg = cfg or GateConfig()
    env = make_env(gate_task_config(path, cfg, physics_threads, physics))
    policy = ActorCriticPolicy.from_checkpoint(path, env.reset(), env.num_actions)
    return run_gate(G1WalkProbe(env, getattr(env, "unwrapped", env)), policy, cfg, progress)


# -- gait acceptance as gate lines ---------------------------------------------------------------


#: The gait acceptance that training's closing evaluation prints (``app.train.finish`` uses these):
#: every env at the evaluator's default command, (0.5, 0, 0) m/s, for 5 s.
ACCEPTANCE_COMMAND: Command = EvalConfig.commands
ACCEPTANCE_HORIZON_S = 5.0


def acceptance_lines(report: EvalReport) -> GateResult:
    """The policy verdict of ``report`` (:meth:`EvalReport.verdict`) as gate lines: falls, then each
    criterion of :data:`~.gait.GAIT_CHECKS` on the walking envs' means, against its threshold."""
    g = walking_means(report.gait, report.config.gait)
    t = report.config.gait
    low, high = t.step_frequency_hz
    falls = int((report.judgement.outcome == FALL).sum())
    lines = [
        GateLine("falls (all envs)", float(falls), 0.0, "<="),
        GateLine("mean air time (s)", float(g.mean_air_time_s[0]), t.min_mean_air_time_s, ">="),
        GateLine("double support ratio", float(g.double_support_ratio[0]), t.max_double_support_ratio, "<="),
        GateLine("step frequency low (Hz)", float(g.step_frequency_hz[0]), low, ">="),
        GateLine("step frequency high (Hz)", float(g.step_frequency_hz[0]), high, "<="),
        GateLine("tracking error (m/s)", float(g.velocity_tracking_error[0]), t.max_velocity_tracking_error, "<="),
    ]
    cfg = GateConfig(starts=report.trace.num_envs, horizon_s=report.config.horizon_s, seed=report.config.seed,
                     battery=(), smoothness_command=ACCEPTANCE_COMMAND, name="gait acceptance")
    return GateResult(lines, {}, 0, cfg)  # no smoothness envs: the falls line holds every fall


def acceptance_checkpoint(path: str, num_envs: int = 32, seed: int = 0, physics_threads: int = 0,
                          make_env: Callable[[Any], VecEnv] | None = None) -> GateResult:
    """Training's closing gait acceptance (0.5 m/s forward, 5 s) of the G1-Walk checkpoint at ``path``,
    judged as the gate is: on the task it recorded at the reference physics, ``num_envs`` noisy starts."""
    from isaac_adapter.evaluation.evaluator import ActorCriticPolicy

    if make_env is None:
        from isaac_adapter.tasks.g1_walk import G1WalkEnv as make_env
    env = make_env(gate_task_config(path, GateConfig(starts=num_envs, battery=(), seed=seed), physics_threads))
    policy = ActorCriticPolicy.from_checkpoint(path, env.reset(), env.num_actions)
    cfg = EvalConfig(horizon_s=ACCEPTANCE_HORIZON_S, seed=seed, commands=ACCEPTANCE_COMMAND)
    return acceptance_lines(Evaluator(G1WalkProbe(env), cfg).evaluate(policy))
