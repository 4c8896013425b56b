"""What the evaluator reads from the G1 walk env (:class:`~isaac_adapter.evaluation.evaluator.EvalProbe`),
and the task's fall rules as evaluation threshold sets.

The evaluator never touches the physics state: the probe turns the task's pre-reset view of each
step (:meth:`~isaac_adapter.tasks.g1_walk.task.G1WalkTask.pre_reset_state`) into a
:class:`~isaac_adapter.evaluation.trace.StepSample` through the task's own frame terms.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from ppo_bootstrap.env import ObsGroups, StepResult

from isaac_adapter.backends.base import PhysicsState
from isaac_adapter.evaluation.judge import ThresholdSet
from isaac_adapter.evaluation.trace import StepSample
from isaac_adapter.tasks.g1_walk import terms
from isaac_adapter.tasks.g1_walk.causes import CAUSE_NAMES
from isaac_adapter.tasks.g1_walk.config import G1WalkConfig

if TYPE_CHECKING:
    from isaac_adapter.tasks.g1_walk.env import G1WalkEnv


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


class G1WalkProbe:
    """:class:`~isaac_adapter.evaluation.evaluator.EvalProbe` of :class:`~isaac_adapter.tasks.g1_walk.G1WalkEnv`.

    Reads the task's ``pre_reset_state`` after a step, ``state`` and ``command`` after a reset,
    ``reset(seed=...)``, ``set_commands(...)`` and ``info["termination_cause"]``.
    """

    def __init__(self, env: G1WalkEnv) -> None:
        self.env = env
        self.dt = float(env.task_cfg.policy_dt)
        self.cause_names = CAUSE_NAMES
        self.training_rule = training_thresholds(env.task_cfg)
        self.evaluation_rule = evaluation_thresholds(env.task_cfg)

    def reset(self, seed: int, commands: torch.Tensor | None) -> ObsGroups:
        obs = self.env.reset(seed=seed)
        return self.env.set_commands(commands) if commands is not None else obs

    def _sample(self, s: PhysicsState, command: torch.Tensor, cause: torch.Tensor) -> StepSample:
        return StepSample(
            root_pos_w=s.root_pos_w,
            tilt_xy=terms.tilt_xy(terms.projected_gravity(s.root_quat_w)),
            lin_vel_b=terms.to_body(s.root_quat_w, s.root_lin_vel_w),
            ang_vel_b=terms.to_body(s.root_quat_w, s.root_ang_vel_w),
            foot_contact=s.foot_contact,
            torque=s.applied_torque,
            command=command,
            env_cause=cause,
        )

    def current(self) -> StepSample:
        env = self.env
        return self._sample(env.state, env.command.clone(), torch.zeros(env.num_envs, dtype=torch.long))

    def after_step(self, result: StepResult) -> StepSample:
        env = self.env
        # rows of envs that ended come from the terminal snapshot: env.state already shows their respawn
        state, command = env.pre_reset_state(result.final_env_ids.to(env.device))
        cause = result.info.get("termination_cause", torch.zeros(env.num_envs, dtype=torch.long))
        return self._sample(state, command, cause.clone())
