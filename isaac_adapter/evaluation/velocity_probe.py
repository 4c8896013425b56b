"""The evaluator's view of Isaac Lab's manager-based velocity tasks (``Isaac-Velocity-*-G1``).

Those tasks end an episode by their own terms (a torso contact, the time limit), not by the G1
task's fall rule, so there is no training rule to reproduce (``training_rule`` is None) and the
evaluation judges posture with the same thresholds as for the project's task (0.60 m, tilt 0.8
after 0.4 s, lateral velocity 1.15 m/s after 0.7 s).

What the probe reads, duck-typed (no Isaac Lab import): the articulation ``scene["robot"]``, the
contact sensor ``scene["contact_forces"]`` on the feet, the command term ``base_velocity`` and the
env's ``_reset_idx``, which it wraps so that the state of every env that ends is read before Isaac
Lab resets it. Fixed commands are held by replacing the command term's resampling for the
duration of the evaluation: every reset then draws the held command, never a standing or heading
command.

By default the policy is judged as Isaac Lab's play scripts run it (the env config's ``play_mode``):
without the training world's interval events (Isaac Lab's G1 is pushed at 0.5 m/s every 10-15 s)
and without observation noise; ``as_played=False`` keeps both. Either way they come back on
:meth:`IsaacVelocityProbe.close`.
"""

from __future__ import annotations

from typing import Any

import torch

from ppo_bootstrap.env import ObsGroups, StepResult
from ppo_bootstrap.episode import final_rows

from isaac_adapter.evaluation.g1_probe import leg_joint_ids
from isaac_adapter.evaluation.judge import ThresholdSet
from isaac_adapter.evaluation.trace import StepSample
from isaac_adapter.isaaclab.robot import as_torch, feet_in_contact, root_quat_wxyz
from isaac_adapter.tasks.g1_walk import terms
from isaac_adapter.tasks.g1_walk.causes import CAUSE_NAMES, CAUSE_TIMEOUT, CAUSE_TRAIN_RULE

class IsaacVelocityProbe:
    """:class:`~isaac_adapter.evaluation.evaluator.EvalProbe` of a manager-based Isaac Lab velocity task.

    Args:
        env: the task behind an :class:`~isaac_adapter.adapters.isaaclab.IsaacLabVecEnv`.
        feet: the foot bodies, regular expression, in the robot and in the contact sensor.
        command_name: the velocity command term.
        as_played: judge without the env's interval events and observation noise, as Isaac Lab's
            play scripts do; False: in the world the policy trained in.
    """

    def __init__(self, env: Any, feet: str = ".*_ankle_roll_link", command_name: str = "base_velocity",
                 as_played: bool = True) -> None:
        self.env = env
        self.base = base = env.unwrapped
        self.dt = float(base.step_dt)
        self.cause_names = CAUSE_NAMES
        self.training_rule = None
        self.evaluation_rule = ThresholdSet(name=f"eval {ThresholdSet.eval_success_height:.2f} m")  # the G1 task's
        self.robot = base.scene["robot"]
        # the gate's leg columns: the task's one joint-position action drives every joint in the
        # articulation's order, the order of the joint velocities too
        if base.action_manager.total_action_dim != self.robot.num_joints:
            raise ValueError(f"{base.action_manager.total_action_dim} actions for {self.robot.num_joints} joints: the "
                             "probe reads the actions as one per joint, in the articulation's order")
        self.leg_joint_ids = leg_joint_ids(tuple(self.robot.joint_names))
        self.sensor = base.scene["contact_forces"]
        self._sensor_feet = self.sensor.find_bodies(feet)[0]
        self.command_term = base.command_manager.get_term(command_name)
        self._held: torch.Tensor | None = None
        self._sample_command = self.command_term._resample_command
        self.command_term._resample_command = self._resample
        self._pre_reset: StepSample | None = None
        self._reset_idx = base._reset_idx
        base._reset_idx = self._snapshot_then_reset  # an instance attribute, found before the class's method
        self._interval_events: tuple[list, list] | None = None
        self._noise: list[tuple[Any, Any]] = []  # (observation term config, its noise) while played
        if as_played:
            self._play()

    def _play(self) -> None:
        """Take the interval events (pushes) and every observation term's noise away, as the env
        config's ``play_mode`` does before the env is built."""
        events = self.base.event_manager
        if "interval" in events._mode_term_cfgs:
            self._interval_events = (events._mode_term_names["interval"], events._mode_term_cfgs["interval"])
            events._mode_term_names["interval"], events._mode_term_cfgs["interval"] = [], []
        for cfgs in self.base.observation_manager._group_obs_term_cfgs.values():
            for cfg in cfgs:
                if cfg.noise is not None:
                    self._noise.append((cfg, cfg.noise))
                    cfg.noise = None

    def _resample(self, env_ids: Any) -> None:
        self._sample_command(env_ids)
        if self._held is not None:  # held commands: no standing, no heading control
            term = self.command_term
            term.vel_command_b[env_ids] = self._held[env_ids]
            term.is_standing_env[env_ids] = False
            if hasattr(term, "is_heading_env"):
                term.is_heading_env[env_ids] = False

    def _snapshot_then_reset(self, env_ids: Any, *args: Any, **kwargs: Any) -> Any:
        self._pre_reset = self._read(torch.zeros(self.base.num_envs, dtype=torch.long, device=self.base.device))
        return self._reset_idx(env_ids, *args, **kwargs)

    def _read(self, cause: torch.Tensor) -> StepSample:
        d = self.robot.data
        gravity_b, lin_vel_b, ang_vel_b = terms.root_in_body(
            root_quat_wxyz(d), as_torch(d.root_link_lin_vel_w), as_torch(d.root_link_ang_vel_w)
        )
        return StepSample(
            root_pos_w=as_torch(d.root_link_pos_w) - self.base.scene.env_origins,
            tilt_xy=terms.tilt_xy(gravity_b),
            lin_vel_b=lin_vel_b,
            ang_vel_b=ang_vel_b,
            foot_contact=feet_in_contact(self.sensor, self._sensor_feet),
            torque=as_torch(self.robot.actuators.applied_effort).clone(),
            command=self.command_term.command.clone(),
            env_cause=cause,
            action=self.base.action_manager.action.clone(),  # the step's action, before its reset zeroes it
            joint_vel=as_torch(d.joint_vel).clone(),
        )

    def reset(self, seed: int, commands: torch.Tensor | None) -> ObsGroups:
        self.base.seed(seed)
        n, device = self.base.num_envs, self.base.device
        self._held = None if commands is None else torch.as_tensor(commands, dtype=torch.float32, device=device).expand(n, 3).clone()
        return self.env.reset()

    def current(self) -> StepSample:
        return self._read(torch.zeros(self.base.num_envs, dtype=torch.long, device=self.base.device))

    def after_step(self, result: StepResult) -> StepSample:
        cause = torch.zeros(self.base.num_envs, dtype=torch.long, device=self.base.device)
        cause[result.truncated] = CAUSE_TIMEOUT
        cause[result.terminated] = CAUSE_TRAIN_RULE  # the task's own termination terms
        sample = self._read(cause)
        ended = final_rows(result)[0].to(self.base.device)
        if ended.numel() and self._pre_reset is not None:  # their live rows already show the respawn
            for name in ("root_pos_w", "tilt_xy", "lin_vel_b", "ang_vel_b", "foot_contact", "torque", "command",
                         "action", "joint_vel"):
                getattr(sample, name)[ended] = getattr(self._pre_reset, name)[ended]
        self._pre_reset = None
        return sample

    def close(self) -> None:
        """Give the env its own reset, command sampling, interval events and observation noise back."""
        self.base._reset_idx = self._reset_idx
        self.command_term._resample_command = self._sample_command
        self._held = None
        if self._interval_events is not None:
            events = self.base.event_manager
            events._mode_term_names["interval"], events._mode_term_cfgs["interval"] = self._interval_events
            self._interval_events = None
        for cfg, noise in self._noise:
            cfg.noise = noise
        self._noise = []
