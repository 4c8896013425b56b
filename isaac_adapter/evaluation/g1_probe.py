"""The evaluator's view of the G1 walk task (:class:`~isaac_adapter.evaluation.evaluator.EvalProbe`),
and the task's fall rules as evaluation threshold sets.

The task exposes what an evaluation needs: its pre-reset view of each step
(:meth:`~isaac_adapter.tasks.g1_walk.task.G1WalkTask.pre_reset_state`), its frame terms, seeded
resets and held commands. The probe turns that into a :class:`~isaac_adapter.evaluation.trace.StepSample`;
it never touches a simulator. The task may run on any simulator: the MuJoCo ``G1WalkEnv`` is its own
``VecEnv``; the Isaac Lab ``G1WalkDirectEnv`` is stepped through ``IsaacLabVecEnv`` and read directly.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import torch

from ppo_bootstrap.env import ObsGroups, StepResult
from ppo_bootstrap.episode import final_rows

from isaac_adapter.evaluation.judge import ThresholdSet
from isaac_adapter.evaluation.trace import StepSample
from isaac_adapter.tasks.g1_walk import terms
from isaac_adapter.tasks.g1_walk.causes import CAUSE_NAMES
from isaac_adapter.tasks.g1_walk.config import G1WalkConfig

if TYPE_CHECKING:
    from ppo_bootstrap.env import VecEnv

    from isaac_adapter.tasks.g1_walk.task import G1WalkTask, PhysicsState  # the task's view of its robot


LEG_JOINT_KEYS = ("hip", "knee", "ankle")  # the 12 leg joints of the G1 (6 per leg); waist and arms are not legs


def leg_joint_ids(joint_names: tuple[str, ...]) -> torch.Tensor:
    """``[L]`` long: indices of the hip, knee and ankle joints in ``joint_names`` (actuator order = action order)."""
    return torch.tensor([i for i, name in enumerate(joint_names) if any(k in name for k in LEG_JOINT_KEYS)],
                        dtype=torch.long)


def training_thresholds(cfg: G1WalkConfig) -> ThresholdSet:
    """The task's own termination rule as a threshold set: judging with it must reproduce the env's falls."""
    return ThresholdSet(
        name=f"train rule {cfg.train_collapse_height:.2f} m",
        eval_success_height=cfg.train_collapse_height,
        tilt_xy_max=cfg.tilt_threshold,
        lateral_vel_max=cfg.lateral_vel_threshold,
        tilt_grace_s=cfg.tilt_grace_s,
        lateral_grace_s=cfg.lateral_grace_s,
    )


def evaluation_thresholds(cfg: G1WalkConfig, eval_success_height: float | None = None) -> ThresholdSet:
    """Evaluation posture: ``eval_success_height`` (the task's by default), the task's tilt and lateral limits."""
    height = cfg.eval_success_height if eval_success_height is None else eval_success_height
    return ThresholdSet(
        name=f"eval {height:.2f} m",
        eval_success_height=height,
        tilt_xy_max=cfg.tilt_threshold,
        lateral_vel_max=cfg.lateral_vel_threshold,
        tilt_grace_s=cfg.tilt_grace_s,
        lateral_grace_s=cfg.lateral_grace_s,
    )


def judged_walk_config(cfg: G1WalkConfig, *lines: float) -> G1WalkConfig:
    """``cfg`` as an evaluation steps it: its episodes ended no higher than the lowest height line the
    judge draws (``lines``; ``cfg.eval_success_height`` when none is given).

    A training rule above a line (say 0.62 m against the gate's 0.60 m) would end a rollout at a dip
    that line does not call a fall, and the judge would count the end as the training rule's: the
    task's own rule (:attr:`G1WalkConfig.train_collapse_height`, or the line if that is lower) ends it
    instead, so the lines alone judge. Every other field is ``cfg``'s.
    """
    lowest = min(lines) if lines else cfg.eval_success_height
    if cfg.train_collapse_height <= lowest:
        return cfg
    return replace(cfg, train_collapse_height=min(G1WalkConfig.train_collapse_height, lowest))


class G1WalkProbe:
    """:class:`~isaac_adapter.evaluation.evaluator.EvalProbe` of the G1 walk task.

    Args:
        env: the ``VecEnv`` the evaluator steps.
        task: the :class:`~isaac_adapter.tasks.g1_walk.task.G1WalkTask` behind it (default: ``env``
            itself, as for ``G1WalkEnv``; for Isaac Lab, ``IsaacLabVecEnv(...).unwrapped``).

    Reads the task's ``pre_reset_state`` after a step, ``state`` and ``command`` after a reset, its
    generator (seeded resets), ``set_commands(...)`` and ``info["termination_cause"]`` (or the same
    key of the simulator's ``extras``). Each step sample also carries the step's clipped action and
    the joint velocities (pre-reset, like everything else); :attr:`leg_joint_ids` names the leg columns.
    """

    def __init__(self, env: VecEnv, task: G1WalkTask | None = None) -> None:
        self.env = env
        self.task = env if task is None else task
        self.dt = float(self.task.task_cfg.policy_dt)
        self.cause_names = CAUSE_NAMES
        self.training_rule = training_thresholds(self.task.task_cfg)
        self.evaluation_rule = evaluation_thresholds(self.task.task_cfg)
        self.leg_joint_ids = leg_joint_ids(self.task.joint_names)

    def reset(self, seed: int, commands: torch.Tensor | None) -> ObsGroups:
        self.task.set_commands(None)  # an earlier evaluation's held commands must not outlive it
        self.task.generator.manual_seed(seed)  # spawn noise and sampled commands follow the seed
        obs = self.env.reset()
        return self.task.set_commands(commands) if commands is not None else obs

    def _sample(self, s: PhysicsState, command: torch.Tensor, cause: torch.Tensor,
                action: torch.Tensor | None = None) -> StepSample:
        gravity_b, lin_vel_b, ang_vel_b = terms.root_in_body(s.root_quat_w, s.root_lin_vel_w, s.root_ang_vel_w)
        return StepSample(
            root_pos_w=s.root_pos_w,
            tilt_xy=terms.tilt_xy(gravity_b),
            lin_vel_b=lin_vel_b,
            ang_vel_b=ang_vel_b,
            foot_contact=s.foot_contact,
            torque=s.applied_torque,
            command=command,
            env_cause=cause,
            action=action,
            joint_vel=s.joint_vel,
            # a kick leaves last_push non-zero for the step it happened in (ended envs are not kicked)
            pushed=(self.task.last_push != 0).any(-1) if self.task.task_cfg.randomization.pushes else None,
        )

    def current(self) -> StepSample:
        task = self.task
        return self._sample(task.state, task.command.clone(), torch.zeros(task.num_envs, dtype=torch.long),
                            task.last_action.clone())

    def after_step(self, result: StepResult) -> StepSample:
        task = self.task
        # rows of envs that ended come from the terminal snapshot: task.state already shows their respawn
        ended = final_rows(result)[0].to(task.device)
        state, command = task.pre_reset_state(ended)
        # the step's action: last_action, which the reset of an ended env zeroed (its terminal copy has it)
        action = task.last_action.clone()
        action[ended] = task.terminal_task["last_action"][ended]
        cause = result.info.get("termination_cause", result.info.get("extras", {}).get("termination_cause"))
        if cause is None:
            cause = torch.zeros(task.num_envs, dtype=torch.long)
        return self._sample(state, command, cause.clone(), action)
