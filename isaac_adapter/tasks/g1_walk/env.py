"""The G1 velocity-walking task as a batched env producing :class:`ppo_bootstrap.env.StepResult`.

Shaped like an Isaac Lab ``DirectRLEnv``: ``step`` applies actions for ``decimation`` physics
substeps, computes rewards and episode ends on the post-step state, captures the final observation
and a terminal snapshot of the ending envs, then resets only those envs (same-step auto-reset).

Episode ends (see :mod:`.config` for the step arithmetic):

* ``terminated`` (a fall): root height from step 1, tilt and lateral velocity after their grace
  windows. The exclusive cause follows priority height > tilt > lateral.
* ``truncated`` (timeout): set at episode step ``max_episode_length`` (1000 at 50 Hz / 20 s), whether
  or not the robot also fell on that step; both flags are reported honestly and the library's rule
  "terminated wins" decides the value target. ``termination_cause`` then says the fall.

Per env the task keeps two first-crossing records ``[N, 3]`` (columns height, tilt, lateral; -1 = never):
``first_raw_step``, the first episode step the signal was over its threshold, grace ignored; and
``first_active_step``, the first step its rule fired (over the threshold *and* checked). Since a fired
rule ends the episode, ``first_active_step`` is either -1 or the last step of the episode.
When an episode ends, these records, the cause and a terminal snapshot (physics state and the task
histories the observation reads) are copied into ``last_*``, ``terminal_state`` and
``terminal_task``, which survive the reset; ``terminal_observations(ids)`` recomputes the final
observation from them.

``info`` per step: ``"termination_cause"`` ``[N]`` long (0 running, 1 height, 2 tilt, 3 lateral,
4 timeout), ``"time_outs"`` ``[N]`` bool, and ``"log"`` scalars (episode ends by cause this step,
statistics of the last finished episodes: length, support ratios, step frequency, reward terms).
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import torch

from ppo_bootstrap.env import CRITIC, POLICY, ObsGroups, StepResult, check_actions
from ppo_bootstrap.episode import done_mask

from isaac_adapter.backends.base import PhysicsBackend, PhysicsState
from isaac_adapter.tasks.g1_walk import terms
from isaac_adapter.tasks.g1_walk.config import G1WalkConfig

# joints pulled towards the nominal pose (they should not wander while the legs walk)
_DEVIATION_JOINTS = ("hip_yaw", "hip_roll", "waist", "shoulder", "elbow", "wrist")


Backend = tuple[PhysicsBackend, torch.Tensor, tuple[str, ...]]
"""What a backend factory returns: the backend, the nominal ``qpos`` ``[7 + J]`` and the joint names."""


def _g1_robot() -> tuple[Any, dict[str, Any]]:
    """The asset module and the names a backend needs to find the G1's root, feet and sensors."""
    from isaac_adapter.tasks.g1_walk import assets

    names = dict(
        root_body=assets.ROOT_BODY,
        foot_bodies=assets.FEET,
        foot_contact_sensors=assets.FOOT_CONTACT_SENSORS,
        foot_vel_sensors=assets.FOOT_VEL_SENSORS,
    )
    return assets, names


def make_mujoco_backend(cfg: G1WalkConfig) -> Backend:
    """The embedded default: MuJoCo on all CPU cores."""
    from isaac_adapter.backends.mujoco_cpu import MujocoCpuBackend

    assets, names = _g1_robot()
    g1 = assets.build_g1_model(cfg.model_variant, cfg.sim_dt)
    backend = MujocoCpuBackend(g1.model, cfg.num_envs, cfg.decimation, nthread=cfg.physics_threads, **names)
    return backend, torch.tensor(g1.nominal_qpos, dtype=torch.float32), g1.joint_names


def make_warp_backend(cfg: G1WalkConfig, **kwargs: Any) -> Backend:
    """MuJoCo Warp on ``cfg.device`` (a GPU, or Warp's CPU device): the same compiled model as the
    CPU default. ``kwargs`` go to :class:`~isaac_adapter.backends.mujoco_warp.MujocoWarpBackend`
    (``nconmax``, ``njmax``, ``check_every``, ...)."""
    from isaac_adapter.backends.mujoco_warp import MujocoWarpBackend

    assets, names = _g1_robot()
    g1 = assets.build_g1_model(cfg.model_variant, cfg.sim_dt)
    backend = MujocoWarpBackend(g1.model, cfg.num_envs, cfg.decimation, device=cfg.device, **names, **kwargs)
    return backend, torch.tensor(g1.nominal_qpos, dtype=torch.float32), g1.joint_names


BACKENDS = {"mujoco": make_mujoco_backend, "warp": make_warp_backend}


class G1WalkEnv:
    """``num_envs`` G1 robots following velocity commands. Implements :class:`ppo_bootstrap.env.VecEnv`.

    Args:
        cfg: task configuration (validated on construction).
        backend: ``"mujoco"`` (embedded CPU default) or a ready :class:`PhysicsBackend`.
        nominal_qpos: ``[7 + J]`` spawn pose, required with a ready backend.
        joint_names: ``J`` names in actuator order, required with a ready backend.
    """

    def __init__(
        self,
        cfg: G1WalkConfig | None = None,
        backend: str | PhysicsBackend = "mujoco",
        nominal_qpos: torch.Tensor | None = None,
        joint_names: tuple[str, ...] | None = None,
    ) -> None:
        self.cfg = cfg = cfg if cfg is not None else G1WalkConfig()
        cfg.validate()
        if isinstance(backend, str):
            if backend not in BACKENDS:
                raise ValueError(f"unknown backend {backend!r}; choose from {sorted(BACKENDS)}")
            backend, nominal_qpos, joint_names = BACKENDS[backend](cfg)
        elif nominal_qpos is None or joint_names is None:
            raise ValueError("a ready backend needs nominal_qpos and joint_names")
        if backend.num_envs != cfg.num_envs or backend.decimation != cfg.decimation:
            raise ValueError("backend num_envs/decimation differ from the config")
        if abs(backend.sim_dt - cfg.sim_dt) > 1e-12:
            raise ValueError(f"backend sim_dt {backend.sim_dt} differs from cfg.sim_dt {cfg.sim_dt}")
        self.backend = backend
        self.device = torch.device(cfg.device)
        self.num_envs = cfg.num_envs
        self.num_actions = backend.num_joints
        self.joint_names = tuple(joint_names)
        self.dt = cfg.policy_dt
        self.max_episode_length = cfg.max_episode_length

        dev, n, j, f = self.device, self.num_envs, self.num_actions, backend.num_feet
        self.nominal_qpos = nominal_qpos.to(dev, torch.float32)
        self.nominal_joint_pos = self.nominal_qpos[7:]
        self.deviation_mask = torch.tensor(
            [any(k in name for k in _DEVIATION_JOINTS) for name in self.joint_names], device=dev, dtype=torch.float32
        )
        # first episode step at which each fall rule is checked: height, tilt, lateral
        self.first_checked_step = torch.tensor([1, cfg.tilt_first_step, cfg.lateral_first_step], device=dev)
        self.generator = torch.Generator(device=dev)
        self.generator.manual_seed(cfg.seed)

        long = dict(device=dev, dtype=torch.long)
        # per-episode histories, cleared on reset
        self.episode_step = torch.zeros(n, **long)
        self.command = torch.zeros(n, 3, device=dev)
        self.held_command: torch.Tensor | None = None  # set_commands: fixed commands that survive resets
        self.last_action = torch.zeros(n, j, device=dev)
        self.prev_joint_vel = torch.zeros(n, j, device=dev)
        self.air_time = torch.zeros(n, f, device=dev)
        self.contact_time = torch.zeros(n, f, device=dev)
        self.touchdown_count = torch.zeros(n, f, **long)
        self.double_support_time = torch.zeros(n, device=dev)
        self.single_support_time = torch.zeros(n, device=dev)
        self.first_raw_step = torch.full((n, 3), terms.NEVER, **long)
        self.first_active_step = torch.full((n, 3), terms.NEVER, **long)
        self.episode_sums: dict[str, torch.Tensor] = {
            name.name: torch.zeros(n, device=dev) for name in fields(cfg.rewards)
        }
        # cause of this step's episode end (0 = still running), [N]
        self.termination_cause = torch.zeros(n, **long)
        # records of each env's last finished episode: they survive the reset
        self.last_cause = torch.zeros(n, **long)
        self.last_episode_length = torch.zeros(n, **long)
        self.last_first_raw_step = torch.full((n, 3), terms.NEVER, **long)
        self.last_first_active_step = torch.full((n, 3), terms.NEVER, **long)
        self.episodes_finished = torch.zeros(n, **long)
        stat_names = ["Episode/length_s", "Episode/double_support_ratio", "Episode/single_support_ratio",
                      "Episode/step_frequency_hz"] + [f"Episode_Reward/{name}" for name in self.episode_sums]
        self.last_episode_stats = {name: torch.zeros(n, device=dev) for name in stat_names}
        self.terminal_state = self._read_state()  # overwritten row by row when envs end
        self.terminal_task = {
            "command": self.command.clone(),
            "last_action": self.last_action.clone(),
            "air_time": self.air_time.clone(),
        }
        self.state = self._read_state()

    # -- VecEnv --------------------------------------------------------------------------------

    def reset(self, seed: int | None = None) -> ObsGroups:
        """Reset every env (reseeding the task's generator first when ``seed`` is given); return
        the initial observation groups."""
        if seed is not None:
            self.generator.manual_seed(seed)
        self._reset_idx(torch.arange(self.num_envs, device=self.device))
        self.state = self._read_state()
        return self.observations_from(self.state, self.command, self.last_action, self.air_time)

    def step(self, actions: torch.Tensor) -> StepResult:
        """Apply ``actions`` ``[N, J]`` (joint offsets in units of ``action_scale``) for one policy step."""
        cfg, w = self.cfg, self.cfg.rewards
        check_actions(actions, self.num_envs, self.num_actions, self.device)
        actions = actions.to(torch.float32).clamp(-cfg.action_clip, cfg.action_clip)
        self.backend.step((self.nominal_joint_pos + cfg.action_scale * actions).to(self.backend.device))
        self.episode_step += 1
        s = self.state = self._read_state()

        gravity_b = terms.projected_gravity(s.root_quat_w)
        lin_vel_b = terms.to_body(s.root_quat_w, s.root_lin_vel_w)
        ang_vel_b = terms.to_body(s.root_quat_w, s.root_ang_vel_w)
        joint_pos_rel = s.joint_pos - self.nominal_joint_pos

        # gait histories
        self.air_time, self.contact_time, touchdown = terms.update_gait(
            s.foot_contact, self.air_time, self.contact_time, self.dt
        )
        self.touchdown_count += touchdown.long()
        in_contact = s.foot_contact.sum(-1)
        self.double_support_time += self.dt * (in_contact == 2)
        self.single_support_time += self.dt * (in_contact == 1)

        # episode ends
        raw = terms.fall_signals(
            s.root_pos_w[:, 2], gravity_b, lin_vel_b,
            cfg.train_collapse_height, cfg.tilt_threshold, cfg.lateral_vel_threshold,
        )
        active = terms.active_falls(raw, self.episode_step, self.first_checked_step)
        self.first_raw_step = terms.record_first(self.first_raw_step, raw, self.episode_step)
        self.first_active_step = terms.record_first(self.first_active_step, active, self.episode_step)
        terminated = active.any(-1)
        truncated = terms.time_out(self.episode_step, self.max_episode_length)
        self.termination_cause = terms.exclusive_cause(active, truncated)

        # rewards, weighted and scaled by the policy step as in Isaac Lab
        parts = {
            "track_lin_vel_xy": terms.track_lin_vel_xy_exp(self.command, lin_vel_b, cfg.tracking_sigma),
            "track_ang_vel_z": terms.track_ang_vel_z_exp(self.command, ang_vel_b, cfg.tracking_sigma),
            "lin_vel_z": terms.lin_vel_z_l2(lin_vel_b),
            "ang_vel_xy": terms.ang_vel_xy_l2(ang_vel_b),
            "flat_orientation": terms.flat_orientation_l2(gravity_b),
            "feet_air_time": terms.feet_air_time_biped(
                self.air_time, self.contact_time, s.foot_contact, self.command, cfg.air_time_threshold
            ),
            "feet_slide": terms.feet_slide(s.foot_contact, s.foot_lin_vel_w),
            "joint_deviation": terms.joint_deviation_l1(joint_pos_rel, self.deviation_mask),
            "joint_torques": terms.joint_torques_l2(s.applied_torque),
            "joint_acc": terms.joint_acc_l2(s.joint_vel, self.prev_joint_vel, self.dt),
            "action_rate": terms.action_rate_l2(actions, self.last_action),
            "termination": terminated.float(),
        }
        if cfg.gait_period_s is not None:
            legs = terms.leg_phases(terms.gait_phase(self.episode_step, self.dt, cfg.gait_period_s))
            parts["gait_contact"] = terms.gait_contact(s.foot_contact, legs, cfg.gait_stance_fraction)
            parts["feet_swing_height"] = terms.feet_swing_height(s.foot_pos_w[..., 2], s.foot_contact, cfg.swing_height_m)
        reward = torch.zeros(self.num_envs, device=self.device)
        for name, value in parts.items():
            term = getattr(w, name) * value * self.dt
            self.episode_sums[name] += term
            reward += term

        self.last_action = actions
        self.prev_joint_vel = s.joint_vel
        obs = self.observations_from(s, self.command, self.last_action, self.air_time)

        done = done_mask(terminated, truncated)
        final_env_ids = torch.nonzero(done).flatten()
        log = self._step_log(s, truncated)
        if final_env_ids.numel() > 0:
            # final observation and snapshot from the pre-reset state; only then reset
            final_obs = {group: value[final_env_ids] for group, value in obs.items()}
            self._record_episode_end(final_env_ids)
            self._reset_idx(final_env_ids)
            self.state = self._read_state()
            obs = self.observations_from(self.state, self.command, self.last_action, self.air_time)
        else:
            final_obs = {group: value[:0] for group, value in obs.items()}

        log.update(self._last_episode_log())
        info: dict[str, Any] = {
            "log": log,
            "termination_cause": self.termination_cause.clone(),
            "time_outs": truncated,
        }
        return StepResult(obs, reward, terminated, truncated, final_obs, final_env_ids, info)

    # -- observations --------------------------------------------------------------------------

    def observations_from(
        self, s: PhysicsState, command: torch.Tensor, last_action: torch.Tensor, air_time: torch.Tensor,
        episode_step: torch.Tensor | None = None,
    ) -> ObsGroups:
        """Observation groups of state ``s`` and task histories (any batch size ``B``).

        ``episode_step`` ``[B]`` (default: the envs' current steps) drives the gait clock, when on.

        Returns:
            ``{"policy": [B, 9 + 3J (+ 2 clock)], "critic": [B, policy + 6 + 2F + J]}``.
        """
        cfg = self.cfg
        gravity_b = terms.projected_gravity(s.root_quat_w)
        policy = terms.policy_obs(
            terms.to_body(s.root_quat_w, s.root_ang_vel_w),
            gravity_b,
            command,
            s.joint_pos - self.nominal_joint_pos,
            s.joint_vel,
            last_action,
            cfg.obs_ang_vel_scale,
            cfg.obs_joint_vel_scale,
        )
        if cfg.gait_period_s is not None:
            step = self.episode_step if episode_step is None else episode_step
            policy = torch.cat([policy, terms.clock_obs(terms.gait_phase(step, self.dt, cfg.gait_period_s))], dim=-1)
        privileged = terms.critic_privileged(
            terms.to_body(s.root_quat_w, s.root_lin_vel_w),
            s.root_pos_w[:, 2],
            s.foot_contact,
            air_time,
            s.applied_torque,
            cfg.obs_torque_scale,
        )
        return {POLICY: policy, CRITIC: torch.cat([policy, privileged], dim=-1)}

    def terminal_observations(self, env_ids: torch.Tensor) -> ObsGroups:
        """Observations recomputed from the terminal snapshot of ``env_ids`` (their last ended episode)."""
        return self.observations_from(
            self.terminal_state.index(env_ids),
            self.terminal_task["command"][env_ids],
            self.terminal_task["last_action"][env_ids],
            self.terminal_task["air_time"][env_ids],
            self.last_episode_length[env_ids],
        )

    # -- episode ends and resets -----------------------------------------------------------------

    def _read_state(self) -> PhysicsState:
        s = self.backend.state()
        if s.root_pos_w.device != self.device:
            s = PhysicsState(**{k: v.to(self.device) for k, v in s.as_dict().items()})
        return s

    def _step_log(self, s: PhysicsState, truncated: torch.Tensor) -> dict[str, torch.Tensor]:
        """Scalars for ``info["log"]``: this step's episode ends by cause, and last-episode statistics.

        0-dim tensors on the env's device, so logging costs no host sync per step (the Runner reads
        them once per iteration).
        """
        cause = self.termination_cause
        log = {
            f"Episode_Termination/{name}": (cause == code).sum().float()
            for code, name in enumerate(terms.CAUSE_NAMES)
            if code != terms.CAUSE_NONE
        }
        log["Episode_Termination/time_out_and_fall"] = (truncated & (cause != terms.CAUSE_TIMEOUT)).sum().float()
        below = s.root_pos_w[:, 2] < self.cfg.eval_success_height
        log["Metrics/below_eval_success_height"] = below.float().mean()
        return log

    def _last_episode_log(self) -> dict[str, torch.Tensor]:
        """Means over every env's most recent finished episode (0 until some env has finished one),
        so each key is present at every step and averaging over steps stays a plain mean."""
        finished = (self.episodes_finished > 0).float()
        count = finished.sum().clamp_min(1.0)
        return {key: (value * finished).sum() / count for key, value in self.last_episode_stats.items()}

    def _record_episode_end(self, env_ids: torch.Tensor) -> None:
        """Copy everything about the ending episodes into buffers that survive the reset."""
        s = self.state
        for name, value in s.as_dict().items():
            getattr(self.terminal_state, name)[env_ids] = value[env_ids]
        self.terminal_task["command"][env_ids] = self.command[env_ids]
        self.terminal_task["last_action"][env_ids] = self.last_action[env_ids]
        self.terminal_task["air_time"][env_ids] = self.air_time[env_ids]
        self.last_cause[env_ids] = self.termination_cause[env_ids]
        self.last_episode_length[env_ids] = self.episode_step[env_ids]
        self.last_first_raw_step[env_ids] = self.first_raw_step[env_ids]
        self.last_first_active_step[env_ids] = self.first_active_step[env_ids]
        self.episodes_finished[env_ids] += 1

        seconds = self.episode_step[env_ids].float() * self.dt
        stats = self.last_episode_stats
        stats["Episode/length_s"][env_ids] = seconds
        stats["Episode/double_support_ratio"][env_ids] = self.double_support_time[env_ids] / seconds
        stats["Episode/single_support_ratio"][env_ids] = self.single_support_time[env_ids] / seconds
        stats["Episode/step_frequency_hz"][env_ids] = self.touchdown_count[env_ids].sum(-1) / seconds
        for name, total in self.episode_sums.items():
            stats[f"Episode_Reward/{name}"][env_ids] = total[env_ids] / seconds

    def set_commands(self, commands: torch.Tensor | None) -> ObsGroups:
        """Hold ``commands`` ``[N, 3]`` (v_x, v_y, w_z) in every env from now on, through resets too
        (evaluation with fixed commands); ``None`` returns to sampling a command at each reset.
        Returns the observations of the current state under the new commands."""
        if commands is None:
            self.held_command = None
            return self.current_observations()
        commands = torch.as_tensor(commands, dtype=torch.float32, device=self.device).expand(self.num_envs, 3)
        self.held_command = commands.clone()
        self.command[:] = self.held_command
        return self.current_observations()

    def _sample_commands(self, k: int) -> torch.Tensor:
        ranges = torch.tensor(
            [self.cfg.lin_vel_x_range, self.cfg.lin_vel_y_range, self.cfg.ang_vel_z_range], device=self.device
        )
        u = torch.rand(k, 3, device=self.device, generator=self.generator)
        return ranges[:, 0] + u * (ranges[:, 1] - ranges[:, 0])

    def _reset_idx(self, env_ids: torch.Tensor) -> None:
        """Reset only ``env_ids``: physics to the nominal pose, a new command, every history cleared."""
        k = env_ids.numel()
        u = torch.rand(k, self.num_actions, device=self.device, generator=self.generator)
        noise = self.cfg.joint_pos_noise * (2 * u - 1)
        qpos = self.nominal_qpos.expand(k, -1).clone()
        qpos[:, 7:] += noise
        qvel = torch.zeros(k, 6 + self.num_actions, device=self.device)
        physics = self.backend.device
        self.backend.reset_envs(env_ids.to(physics), qpos.to(physics), qvel.to(physics))

        sampled = self._sample_commands(k)  # drawn even when held, so the random stream does not depend on it
        self.command[env_ids] = sampled if self.held_command is None else self.held_command[env_ids]
        self.episode_step[env_ids] = 0
        self.last_action[env_ids] = 0.0
        self.prev_joint_vel[env_ids] = 0.0
        self.air_time[env_ids] = 0.0
        self.contact_time[env_ids] = 0.0
        self.touchdown_count[env_ids] = 0
        self.double_support_time[env_ids] = 0.0
        self.single_support_time[env_ids] = 0.0
        self.first_raw_step[env_ids] = terms.NEVER
        self.first_active_step[env_ids] = terms.NEVER
        for total in self.episode_sums.values():
            total[env_ids] = 0.0

    # -- checkpointing ---------------------------------------------------------------------------

    _BUFFERS = (
        "episode_step", "command", "last_action", "prev_joint_vel", "air_time", "contact_time",
        "touchdown_count", "double_support_time", "single_support_time", "first_raw_step",
        "first_active_step", "termination_cause", "last_cause", "last_episode_length",
        "last_first_raw_step", "last_first_active_step", "episodes_finished",
    )  # fmt: skip

    def state_dict(self) -> dict[str, Any]:
        """Physics rows, task buffers and the generator: enough to continue bit for bit."""
        return {
            "physics": self._physics_signature(),
            "backend": self.backend.state_dict(),
            "buffers": {name: getattr(self, name).clone() for name in self._BUFFERS},
            "episode_sums": {k: v.clone() for k, v in self.episode_sums.items()},
            "last_episode_stats": {k: v.clone() for k, v in self.last_episode_stats.items()},
            "terminal_state": {k: v.clone() for k, v in self.terminal_state.as_dict().items()},
            "terminal_task": {k: v.clone() for k, v in self.terminal_task.items()},
            "generator": self.generator.get_state(),
            "held_command": None if self.held_command is None else self.held_command.clone(),
        }

    def _physics_signature(self) -> dict[str, Any]:
        cfg = self.cfg
        return {"model_variant": cfg.model_variant, "sim_dt": cfg.sim_dt, "decimation": cfg.decimation,
                "num_envs": cfg.num_envs, "backend": type(self.backend).__name__}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        # physics rows of another model would load silently and continue nonsense
        saved, current = state.get("physics"), self._physics_signature()
        if saved is not None and saved != current:
            raise ValueError(f"env state was saved for {saved}, this env is {current}")
        self.backend.load_state_dict(state["backend"])
        for name, value in state["buffers"].items():
            setattr(self, name, value.clone().to(self.device))
        for name, value in state["episode_sums"].items():
            self.episode_sums[name] = value.clone().to(self.device)
        for name, value in state["last_episode_stats"].items():
            self.last_episode_stats[name] = value.clone().to(self.device)
        self.terminal_state = PhysicsState(**{k: v.clone().to(self.device) for k, v in state["terminal_state"].items()})
        self.terminal_task = {k: v.clone().to(self.device) for k, v in state["terminal_task"].items()}
        self.generator.set_state(state["generator"].cpu())  # a map_location may have moved it
        held = state.get("held_command")
        self.held_command = None if held is None else held.clone().to(self.device)
        self.state = self._read_state()

    def current_observations(self) -> ObsGroups:
        """Observations of the current state (after :meth:`reset` or :meth:`load_state_dict`)."""
        return self.observations_from(self.state, self.command, self.last_action, self.air_time)
