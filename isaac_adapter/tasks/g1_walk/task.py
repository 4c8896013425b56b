"""The G1 walk task apart from any simulator, as the hooks of an Isaac Lab ``DirectRLEnv``.

:class:`G1WalkTask` holds everything that does not depend on the physics engine: per-env buffers,
the wiring of the term functions (:mod:`.terms`), grace windows, exclusive causes, first crossings,
terminal snapshots and the episode logs. A concrete env mixes it in and supplies the simulator:

* ``_read_robot_state() -> PhysicsState``: every env's robot after the last physics step;
* ``_write_reset_rows(env_ids, qpos, qvel)``: a spawn pose ``[K, 7 + J]`` and velocity ``[K, 6 + J]``
  into the rows ``env_ids`` ``[K]``, every other row untouched;
* ``_apply_action()``: send :attr:`~G1WalkTask.joint_pos_target` ``[N, J]`` to the actuators;
* with domain randomization (``cfg.randomization``, :mod:`.randomization`) also
  ``_write_physics_params(mask, params)`` (per-env model parameters ``{name: [N, ...]}`` into the
  envs of ``mask`` ``[N]``, from their next reset on), ``_push_root_velocity(mask, delta)`` (add
  ``delta`` ``[N, 3]`` m/s to the root's world-frame linear velocity there) and ``num_links``;
* attributes ``num_envs``, ``device``, ``reset_terminated`` and ``reset_time_outs`` (a ``DirectRLEnv``
  has all four),

and calls :meth:`G1WalkTask._init_task` once the robot can be read. ``step`` then runs the hooks in
``DirectRLEnv.step``'s order::

    _pre_physics_step(actions)                 clip, joint-position targets
    _apply_action()                            physics substeps (the simulator's)
    episode_length_buf += 1
    _get_dones() -> (terminated, time_out)     read the robot, gait timers, fall rules, causes
    _get_rewards() -> [N]                      reads reset_terminated
    _get_observations()                        final observations of the ended ids, and
    _record_episode_end(ended)                 their terminal snapshot, before
    _reset_idx(ended)
    _get_observations()

Per env the task keeps two first-crossing records ``[N, 3]`` (columns height, tilt, lateral;
:data:`~.causes.NEVER` = not yet): ``first_raw_step``, the first episode step the signal was over its
threshold, grace ignored; and ``first_active_step``, the first step its rule fired (over the
threshold *and* checked). Since a fired rule ends the episode, ``first_active_step`` is either
``NEVER`` or the last step of the episode. When an episode ends, these records, the cause and a
terminal snapshot (physics state and the task histories the observation reads) are copied into
``last_*``, ``terminal_state`` and ``terminal_task``, which survive the reset;
``terminal_observations(ids)`` recomputes the final observation from them.

No hook forces a host synchronisation on a GPU: no ``.item()``, no data-dependent shapes, no
uploads of Python values per step (constants are made on the device, the command ranges uploaded
once when they change), per-env choices by ``torch.where`` over every env. ``_record_episode_end``
and ``_reset_idx`` take the ended envs as a bool mask ``[N]`` (the embedded env's step, no
``nonzero``) or as env ids ``[K]`` (Isaac Lab's ``DirectRLEnv``); either way they write by mask
over every env and draw spawn noise and commands for all ``N`` envs, so the random stream does not
depend on which envs ended. The spawn rows reach the simulator through ``_write_reset_rows_masked``
(MuJoCo Warp: a masked reset, no sync) or, with ids at hand, ``_write_reset_rows``.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import torch

from ppo_bootstrap.env import CRITIC, POLICY, ObsGroups
from ppo_bootstrap.symmetry import Symmetry

from isaac_adapter.backends.base import PhysicsState
from isaac_adapter.math import put_rows, rows_of
from isaac_adapter.tasks.g1_walk import terms
from isaac_adapter.tasks.g1_walk.causes import CAUSE_NAMES, CAUSE_NON_FINITE, CAUSE_TIMEOUT, ENV_CAUSES, NEVER
from isaac_adapter.tasks.g1_walk.config import G1WalkConfig
from isaac_adapter.tasks.g1_walk.randomization import draw_physics, policy_noise_width

# joints pulled towards the nominal pose (they should not wander while the legs walk)
_DEVIATION_JOINTS = ("hip_yaw", "hip_roll", "waist", "shoulder", "elbow", "wrist")
# the leg joints (the walking gate's smoothness lines measure the same 12: evaluation.g1_probe.LEG_JOINT_KEYS)
_LEG_JOINTS = ("hip", "knee", "ankle")

# per-env buffers saved by state_dict; "episode_step" is episode_length_buf under the task's name
_BUFFERS = (
    "episode_step", "command", "last_action", "prev_joint_vel", "air_time", "contact_time",
    "touchdown_count", "double_support_time", "single_support_time", "first_raw_step",
    "first_active_step", "termination_cause", "last_cause", "last_episode_length",
    "last_first_raw_step", "last_first_active_step", "episodes_finished", "command_steps_left",
    "action_delay", "push_steps_left", "last_push", "policy_frame", "obs_history", "obs_history_started",
)  # fmt: skip


def upload_without_sync(values: Any, device: torch.device | str) -> torch.Tensor:
    """``values`` (numbers, or nested lists of them) as a float32 tensor on ``device``. On CUDA the
    host copy is pinned and copied on the current stream: a pageable upload would make the host
    wait for the GPU, in the middle of a step whose config changed."""
    host = torch.tensor(values, dtype=torch.float32)
    if torch.device(device).type != "cuda":
        return host.to(device)
    return host.pin_memory().to(device, non_blocking=True)


class G1WalkTask:
    """Buffers and hooks of the G1 velocity-walking task over ``num_envs`` robots (see the module docstring).

    ``N`` envs, ``J`` joints, ``F`` feet. Configured by :attr:`task_cfg` (a :class:`G1WalkConfig`;
    an Isaac Lab env keeps its own ``cfg``).
    """

    num_envs: int
    device: torch.device
    task_cfg: G1WalkConfig
    reset_terminated: torch.Tensor  # [N] bool, this step's falls; set by step before _get_rewards
    reset_time_outs: torch.Tensor  # [N] bool, this step's timeouts; likewise

    # -- the simulator seam --------------------------------------------------------------------

    def _read_robot_state(self) -> PhysicsState:
        """Every env's robot after the last physics step, on :attr:`device`."""
        raise NotImplementedError

    def _write_reset_rows(self, env_ids: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """Write ``qpos`` ``[K, 7 + J]`` (root position, quaternion ``w, x, y, z``, joints) and ``qvel``
        ``[K, 6 + J]`` into rows ``env_ids`` ``[K]`` of the simulation."""
        raise NotImplementedError

    def _write_physics_params(self, mask: torch.Tensor, params: dict[str, torch.Tensor]) -> None:
        """Give the envs where ``mask`` ``[N]`` the randomized model parameters ``params``
        (``{name: [N, ...]}``, :func:`~.randomization.draw_physics`); the other envs keep theirs."""
        raise NotImplementedError(f"{type(self).__name__} cannot randomize the physics ({', '.join(params)})")

    def _push_root_velocity(self, mask: torch.Tensor, delta: torch.Tensor) -> None:
        """Add ``delta`` ``[N, 3]`` (m/s, world frame) to the root linear velocity of the envs where ``mask`` ``[N]``."""
        raise NotImplementedError(f"{type(self).__name__} cannot push the robots")

    # -- construction --------------------------------------------------------------------------

    def _init_task(
        self, cfg: G1WalkConfig, nominal_qpos: torch.Tensor, joint_names: tuple[str, ...], num_feet: int
    ) -> None:
        """Allocate the task's buffers; the robot must be readable (:meth:`_read_robot_state`).

        Args:
            cfg: the task configuration.
            nominal_qpos: ``[7 + J]`` spawn pose.
            joint_names: ``J`` actuated joints, in actuator order.
            num_feet: ``F``.
        """
        self.task_cfg = cfg
        dev, n, j, f = self.device, self.num_envs, len(joint_names), num_feet
        # env steps since construction (a DirectRLEnv counts them in step); reward ramps read it
        self.common_step_counter = 0
        self.joint_names = tuple(joint_names)
        self.num_joints = j
        self.nominal_qpos = nominal_qpos.to(dev, torch.float32)
        self.nominal_joint_pos = self.nominal_qpos[7:]
        self.deviation_mask = torch.tensor(
            [any(k in name for k in _DEVIATION_JOINTS) for name in self.joint_names], device=dev, dtype=torch.float32
        )
        self.leg_mask = torch.tensor(
            [any(k in name for k in _LEG_JOINTS) for name in self.joint_names], device=dev, dtype=torch.float32
        )
        self._command_ranges_key: tuple | None = None  # see _command_ranges
        self.first_checked_step = terms.first_checked_steps(cfg.tilt_grace_s, cfg.lateral_grace_s, cfg.policy_dt, dev)
        self.generator = torch.Generator(device=dev)
        self.generator.manual_seed(cfg.seed)

        long = dict(device=dev, dtype=torch.long)
        # per-episode histories, cleared on reset
        self.episode_length_buf = torch.zeros(n, **long)  # policy steps taken in the episode
        self.command = torch.zeros(n, 3, device=dev)
        self.held_command: torch.Tensor | None = None  # set_commands: fixed commands that survive resets
        # policy steps until the command is drawn again (only with cfg.resampling_time_range)
        self.command_steps_left = torch.zeros(n, **long)
        self.actions = torch.zeros(n, j, device=dev)  # this step's clipped actions
        self.joint_pos_target = self.nominal_joint_pos.expand(n, j).clone()
        self.last_action = torch.zeros(n, j, device=dev)
        self.prev_joint_vel = torch.zeros(n, j, device=dev)
        # the policy's observation history (cfg.policy_obs_frames > 1; terms.stack_policy_frames):
        # the last frame it was shown, the frames it acted on before (newest first), and whether the
        # episode has any yet
        width = terms.policy_frame_width(j, cfg.gait_period_s is not None)
        self.policy_frame = torch.zeros(n, width, device=dev)
        self.obs_history = torch.zeros(n, cfg.policy_obs_frames - 1, width, device=dev)
        self.obs_history_started = torch.zeros(n, device=dev, dtype=torch.bool)
        self.air_time = torch.zeros(n, f, device=dev)
        self.contact_time = torch.zeros(n, f, device=dev)
        self.touchdown_count = torch.zeros(n, f, **long)
        self.double_support_time = torch.zeros(n, device=dev)
        self.single_support_time = torch.zeros(n, device=dev)
        self.first_raw_step = torch.full((n, 3), NEVER, **long)
        self.first_active_step = torch.full((n, 3), NEVER, **long)
        # Per-episode reward sums, one column per RewardWeights field; ``episode_sums[name]`` is a view
        # of its column, so a step updates all of them in one op (one kernel on a GPU, not one per term).
        self._reward_names = tuple(f.name for f in fields(cfg.rewards))
        self._reward_sums = torch.zeros(n, len(self._reward_names), device=dev)
        self.episode_sums: dict[str, torch.Tensor] = {
            name: self._reward_sums[:, i] for i, name in enumerate(self._reward_names)
        }
        # the weights: a device vector [T], uploaded when the config's change (see _reward_weights)
        self._reward_table_key: tuple | None = None
        self._reward_step = torch.zeros((), device=dev)  # common_step_counter on the device, for the ramps
        self.reward_step_on_device = False
        # cause of this step's episode end (0 = still running), [N]
        self.termination_cause = torch.zeros(n, **long)
        self.non_finite = torch.zeros(n, device=dev, dtype=torch.bool)  # this step's blow-ups, set by _get_dones
        # records of each env's last finished episode: they survive the reset
        self.last_cause = torch.zeros(n, **long)
        self.last_episode_length = torch.zeros(n, **long)
        self.last_first_raw_step = torch.full((n, 3), NEVER, **long)
        self.last_first_active_step = torch.full((n, 3), NEVER, **long)
        self.episodes_finished = torch.zeros(n, **long)
        stat_names = ["Episode/length_s", "Episode/double_support_ratio", "Episode/single_support_ratio",
                      "Episode/step_frequency_hz"] + [f"Episode_Reward/{name}" for name in self.episode_sums]
        # the same layout: one matrix [N, 4 + terms], a dict of column views
        self._episode_stats = torch.zeros(n, len(stat_names), device=dev)
        self.last_episode_stats = {name: self._episode_stats[:, i] for i, name in enumerate(stat_names)}
        # domain randomization (cfg.randomization): the envs' drawn model parameters {name: [N, ...]},
        # action delays in policy steps, policy steps to the next push and the last push's kick
        rand = cfg.randomization
        self.action_delay = torch.zeros(n, **long)
        self.push_steps_left = torch.zeros(n, **long)
        self.last_push = torch.zeros(n, 3, device=dev)
        self.applied_action = self.actions  # what the physics is driven by (a delayed action with a delay)
        self._noise_width_key: tuple | None = None
        self.physics_params: dict[str, torch.Tensor] = {}
        if rand.physics:  # every env starts on a draw of its own (a reset draws again)
            self.physics_params = draw_physics(rand, n, self.num_links, j, self.generator, dev)
            self._write_physics_params(torch.ones(n, dtype=torch.bool, device=dev), self.physics_params)
        self.terminal_state = self._read_robot_state()  # overwritten row by row when envs end
        self.terminal_task = {
            "command": self.command.clone(),
            "last_action": self.last_action.clone(),
            "air_time": self.air_time.clone(),
            "obs_history": self.obs_history.clone(),
            "obs_history_started": self.obs_history_started.clone(),
        }
        self.state = self._read_robot_state()

    @property
    def reward_step_on_device(self) -> bool:
        """True while a recorded CUDA graph runs the step: the graph advances the env-step count the
        reward ramps read by one per replay, instead of the host writing it (:meth:`_reward_weights`)."""
        return self._reward_step_on_device

    @reward_step_on_device.setter
    def reward_step_on_device(self, value: bool) -> None:
        self._reward_step_on_device = bool(value)
        self._weights_step = None  # the next step works its weights out again, whoever counts

    @property
    def episode_step(self) -> torch.Tensor:
        """``[N]`` long policy steps taken in the episode: 0 right after a reset, 1 after the first step."""
        return self.episode_length_buf

    @episode_step.setter
    def episode_step(self, value: torch.Tensor) -> None:
        self.episode_length_buf = value

    # -- DirectRLEnv hooks ---------------------------------------------------------------------

    def _pre_physics_step(self, actions: torch.Tensor) -> None:
        """Clip the policy's ``actions`` ``[N, J]`` and turn them into joint-position targets
        :attr:`joint_pos_target` ``[N, J]``: offsets of ``action_scale`` rad per unit around the nominal pose."""
        cfg = self.task_cfg
        if self.obs_history.shape[1]:  # the frame the policy acted on joins its history
            terms.push_policy_frame(self.obs_history, self.obs_history_started, self.policy_frame)
        self.actions = actions.to(torch.float32).clamp(-cfg.action_clip, cfg.action_clip)
        self.applied_action = self.actions
        if cfg.randomization.delayed:  # a delay of one step drives the joints by the previous action
            self.applied_action = torch.where(self.action_delay.unsqueeze(-1) > 0, self.last_action, self.actions)
        self.joint_pos_target = self.nominal_joint_pos + cfg.action_scale * self.applied_action

    def _get_dones(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(terminated, time_out)``, ``[N]`` bool each: the training fall rules after their grace
        windows, and the episode budget (both may be true). Records first crossings and the cause.

        The first hook after the physics step, so it reads the robot first (as Isaac Lab's locomotion
        tasks do in ``_compute_intermediate_values``).
        """
        self._compute_intermediate_values()
        cfg, step = self.task_cfg, self.episode_length_buf
        raw = terms.fall_signals(
            self.state.root_pos_w[:, 2], terms.tilt_xy(self.gravity_b), self.lin_vel_b,
            cfg.train_collapse_height, cfg.tilt_threshold, cfg.lateral_vel_threshold,
        )
        active = terms.active_falls(raw, step, self.first_checked_step)
        self.first_raw_step = terms.record_first(self.first_raw_step, raw, step)
        self.first_active_step = terms.record_first(self.first_active_step, active, step)
        time_out = terms.time_out(step, cfg.max_episode_length)
        # a non-finite physics state is no fall (its signals compare false) and ends as a blow-up:
        # truncated, so that every host of the task resets it (see causes.CAUSE_NON_FINITE)
        s = self.state
        self.non_finite = ~torch.isfinite(torch.cat((s.root_pos_w, s.root_quat_w, s.root_lin_vel_w, s.root_ang_vel_w,
                                                     s.joint_pos, s.joint_vel), dim=-1)).all(-1)
        cause = terms.exclusive_cause(active, time_out)
        self.termination_cause = torch.where(self.non_finite, torch.full_like(cause, CAUSE_NON_FINITE), cause)
        return active.any(-1) & ~self.non_finite, time_out | self.non_finite

    def _get_rewards(self) -> torch.Tensor:
        """The step's reward ``[N]``: each of :meth:`_reward_terms` times its weight in
        ``task_cfg.rewards`` and the policy step (as Isaac Lab's reward manager scales); per-episode
        sums kept for the logs. Weights with a :class:`~.config.RewardRamp` are those at
        :attr:`common_step_counter` (:meth:`_reward_weights`)."""
        dt = self.task_cfg.policy_dt
        parts = self._reward_terms()
        # the terms are the leading fields of RewardWeights (the clock's two come last): stacked in
        # that order, so column i of the sums is term i (a term out of place is a KeyError here)
        names = self._reward_names[:len(parts)]
        scaled = torch.stack([parts[name] for name in names], dim=-1) * (self._reward_weights()[:len(names)] * dt)
        # a blown-up env's terms are NaN: zeroed, so that the episode sums (the logs) stay finite
        scaled = torch.where(self.non_finite.unsqueeze(-1), torch.zeros_like(scaled), scaled)
        self._reward_sums[:, :len(names)] += scaled
        reward = scaled.sum(-1)
        # the action-rate and joint-acceleration terms were the last readers of the previous step
        self.last_action = self.actions
        self.prev_joint_vel = self.state.joint_vel
        # the last hook before the observations: the place of Isaac Lab's command manager update
        # and interval events
        self._resample_due_commands()
        self._push_due_envs()
        return reward

    def _reward_weights(self) -> torch.Tensor:
        """``[T]`` each term's weight at :attr:`common_step_counter`, on the device, in the order of
        ``RewardWeights``. Worked out once per env step, by whichever asks first (the reward, or a
        ``DirectRLEnv``'s log in ``_get_dones``).

        The schedule (``task_cfg.reward_ramp_table()``) is uploaded when the config's weights change,
        through pinned memory (:func:`upload_without_sync`). With ramps the weights are computed on
        the device from the env-step count (:func:`~.terms.ramped_weights`), which is written with
        ``fill_`` (the Python number rides in the launch: no upload, no sync) or, while a recorded
        CUDA graph runs the step (:attr:`reward_step_on_device`), advanced by one on the device.
        """
        cfg = self.task_cfg
        key = (tuple(getattr(cfg.rewards, name) for name in self._reward_names), tuple(cfg.reward_ramps))
        if key != self._reward_table_key:
            self._reward_table = upload_without_sync(cfg.reward_ramp_table(), self.device)
            self._reward_table_key, self._weights_step = key, None
            self._weights_now = self._reward_table[0]
        if cfg.reward_ramps and self._weights_step != self.common_step_counter:
            if self.reward_step_on_device:
                self._reward_step += 1
            else:
                self._reward_step.fill_(self.common_step_counter)
            self._weights_now = terms.ramped_weights(self._reward_table, self._reward_step)
            self._weights_step = self.common_step_counter
        return self._weights_now

    def _get_observations(self) -> ObsGroups:
        """Observation groups of every env now (see :meth:`observations_from`); with
        ``randomization.obs_noise`` the policy's carries uniform noise, the critic's none; with
        ``policy_obs_frames`` > 1 the policy's frame is followed by the frames acted on before.

        The policy's frame is kept as the one it acts on next (:attr:`policy_frame`): the last
        call before a step is what the step's history records."""
        obs = self.observations_from(self.state, self.command, self.last_action, self.air_time)
        if self.task_cfg.randomization.noisy:
            width = self._policy_noise_width()
            u = torch.rand(obs[POLICY].shape, device=self.device, generator=self.generator)
            obs = {**obs, POLICY: obs[POLICY] + (2 * u - 1) * width}
        if not self.obs_history.shape[1]:
            return obs
        self.policy_frame.copy_(obs[POLICY])
        return self._with_history(obs, self.obs_history, self.obs_history_started)

    @staticmethod
    def _with_history(obs: ObsGroups, history: torch.Tensor, started: torch.Tensor) -> ObsGroups:
        """``obs`` with its policy frame ``[B, D]`` followed by ``history`` ``[B, H, D]`` (started ``[B]``)."""
        return {**obs, POLICY: terms.stack_policy_frames(obs[POLICY], history, started)}

    def _policy_noise_width(self) -> torch.Tensor:
        """``[D]`` the half-width of the noise on each policy column, uploaded when the config's changes."""
        cfg = self.task_cfg
        key = (tuple(sorted(cfg.randomization.obs_noise.items())), cfg.obs_ang_vel_scale, cfg.obs_joint_vel_scale,
               cfg.gait_period_s is not None)
        if key != self._noise_width_key:
            widths = terms.policy_term_widths(self.num_joints, cfg.gait_period_s is not None)
            scales = {"ang_vel": cfg.obs_ang_vel_scale, "joint_vel": cfg.obs_joint_vel_scale}  # as observations_from scales
            self._noise_width = upload_without_sync(policy_noise_width(cfg.randomization, widths, scales), self.device)
            self._noise_width_key = key
        return self._noise_width

    def _push_due_envs(self) -> None:
        """With ``randomization.push_interval_s``: kick every env whose push is due this step (envs
        that ended get a new interval from the reset): ``push_velocity`` drawn per axis added to the
        root's world-frame x and y velocity, the next push drawn in ``push_interval_s``; the robot is
        read again. Draws for every env, selects with masks: no host synchronisation."""
        rand, n = self.task_cfg.randomization, self.num_envs
        if not rand.pushes:
            return
        self.push_steps_left -= 1
        due = (self.push_steps_left <= 0) & ~(self.reset_terminated | self.reset_time_outs)
        lo, hi = rand.push_velocity
        planar = lo + (hi - lo) * torch.rand(n, 2, device=self.device, generator=self.generator)
        kick = torch.cat([planar, torch.zeros(n, 1, device=self.device)], dim=-1) * due.unsqueeze(-1)
        self.last_push = kick
        self._push_root_velocity(due, kick)
        put_rows(self.push_steps_left, due, self._sample_hold_steps(n, rand.push_interval_s))
        self.state = self._read_robot_state()

    def _reset_idx(self, ended: torch.Tensor) -> None:
        """Reset only the envs ``ended``: a bool mask ``[N]``, or env ids ``[K]`` (Isaac Lab's call).
        Physics to the nominal pose plus joint noise, a new command, every history cleared;
        :attr:`state` is read again.

        Spawn noise and commands are drawn for all ``N`` envs and kept where ``ended``: fixed
        shapes, so a reset by mask needs no host synchronisation, and the random stream does not
        depend on which envs ended.
        """
        cfg, n = self.task_cfg, self.num_envs
        ended = torch.as_tensor(ended, device=self.device)
        done = self._as_mask(ended)
        u = torch.rand(n, self.num_joints, device=self.device, generator=self.generator)
        noise = cfg.joint_pos_noise * (2 * u - 1)
        qpos = self.nominal_qpos.expand(n, -1).clone()
        qpos[:, 7:] += noise
        qvel = torch.zeros(n, 6 + self.num_joints, device=self.device)
        rand = cfg.randomization
        if rand.physics:  # before the spawn rows: the simulator's forward pass of the reset reads them
            drawn = draw_physics(rand, n, self.num_links, self.num_joints, self.generator, self.device)
            for name, value in drawn.items():
                put_rows(self.physics_params[name], done, value)
            self._write_physics_params(done, self.physics_params)
        if ended.dtype == torch.bool:
            self._write_reset_rows_masked(done, qpos, qvel)
        else:  # ids at hand: the simulator's id-based write, no nonzero needed
            ids = ended.to(self.device, torch.long)
            self._write_reset_rows(ids, qpos[ids], qvel[ids])

        # drawn even when held, so the random stream does not depend on it (it depends on the config only)
        sampled = self._sample_commands(n)
        column = done.unsqueeze(-1)
        put_rows(self.command, done, sampled if self.held_command is None else self.held_command)
        if cfg.resampling_time_range is not None:
            put_rows(self.command_steps_left, done, self._sample_command_steps(n))
        if rand.delayed:
            low, high = rand.action_delay_steps
            delay = torch.randint(low, high + 1, (n,), device=self.device, generator=self.generator)
            put_rows(self.action_delay, done, delay)
        if rand.pushes:
            put_rows(self.push_steps_left, done, self._sample_hold_steps(n, rand.push_interval_s))
        # masked_fill_ with a Python number: no upload, no host synchronisation on a GPU
        for buffer in (self.episode_length_buf, self.last_action, self.prev_joint_vel, self.air_time,
                       self.contact_time, self.touchdown_count, self.double_support_time, self.single_support_time,
                       self._reward_sums, self.obs_history_started):
            buffer.masked_fill_(rows_of(done, buffer), 0)
        self.first_raw_step.masked_fill_(column, NEVER)
        self.first_active_step.masked_fill_(column, NEVER)
        self.state = self._read_robot_state()

    def _write_reset_rows_masked(self, mask: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """Spawn rows ``qpos`` ``[N, 7 + J]`` / ``qvel`` ``[N, 6 + J]`` into the envs where ``mask``
        ``[N]``; by default through ``_write_reset_rows`` with the ``nonzero`` ids (an env whose
        simulator resets by mask overrides this)."""
        ids = torch.nonzero(mask).flatten()
        if ids.numel():
            self._write_reset_rows(ids, qpos[ids], qvel[ids])

    def _as_mask(self, ended: torch.Tensor) -> torch.Tensor:
        """``[N]`` bool from a mask ``[N]`` or env ids ``[K]``."""
        ended = torch.as_tensor(ended, device=self.device)
        if ended.dtype == torch.bool:
            return ended
        mask = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        return mask.index_fill_(0, ended.to(torch.long), True)

    # -- what the hooks compute ----------------------------------------------------------------

    def _compute_intermediate_values(self) -> None:
        """Read the robot after the physics step; its body-frame quantities; advance the gait timers."""
        dt = self.task_cfg.policy_dt
        s = self.state = self._read_robot_state()
        self.gravity_b, self.lin_vel_b, self.ang_vel_b = terms.root_in_body(
            s.root_quat_w, s.root_lin_vel_w, s.root_ang_vel_w
        )
        self.joint_pos_rel = s.joint_pos - self.nominal_joint_pos
        self.air_time, self.contact_time, touchdown = terms.update_gait(
            s.foot_contact, self.air_time, self.contact_time, dt
        )
        self.touchdown_count += touchdown.long()
        in_contact = s.foot_contact.sum(-1)
        self.double_support_time += dt * (in_contact == 2)
        self.single_support_time += dt * (in_contact == 1)

    def _reward_terms(self) -> dict[str, torch.Tensor]:
        """Unweighted reward terms ``[N]`` by their name in :class:`~.config.RewardWeights`, in summing order."""
        cfg, s, dt = self.task_cfg, self.state, self.task_cfg.policy_dt
        parts = {
            "track_lin_vel_xy": terms.track_lin_vel_xy_exp(self.command, self.lin_vel_b, cfg.tracking_sigma),
            "track_ang_vel_z": terms.track_ang_vel_z_exp(self.command, self.ang_vel_b, cfg.tracking_sigma),
            "lin_vel_z": terms.lin_vel_z_l2(self.lin_vel_b),
            "ang_vel_xy": terms.ang_vel_xy_l2(self.ang_vel_b),
            "flat_orientation": terms.flat_orientation_l2(self.gravity_b),
            "feet_air_time": terms.feet_air_time_biped(
                self.air_time, self.contact_time, s.foot_contact, self.command, cfg.air_time_threshold
            ),
            "feet_slide": terms.feet_slide(s.foot_contact, s.foot_lin_vel_w),
            "joint_deviation": terms.joint_deviation_l1(self.joint_pos_rel, self.deviation_mask),
            "joint_torques": terms.joint_torques_l2(s.applied_torque),
            "joint_acc": terms.joint_acc_l2(s.joint_vel, self.prev_joint_vel, dt),
            "action_rate": terms.action_rate_l2(self.actions, self.last_action),
            "joint_vel": terms.joint_vel_l2(s.joint_vel, self.leg_mask),
            "termination": self.reset_terminated.float(),
        }
        if cfg.gait_period_s is not None:
            legs = terms.leg_phases(terms.gait_phase(self.episode_length_buf, dt, cfg.gait_period_s))
            parts["gait_contact"] = terms.gait_contact(s.foot_contact, legs, cfg.gait_stance_fraction)
            parts["feet_swing_height"] = terms.feet_swing_height(s.foot_pos_w[..., 2], s.foot_contact, cfg.swing_height_m)
        return parts

    def observations_from(
        self, s: PhysicsState, command: torch.Tensor, last_action: torch.Tensor, air_time: torch.Tensor,
        episode_step: torch.Tensor | None = None,
    ) -> ObsGroups:
        """Observation groups of state ``s`` and task histories (any batch size ``B``).

        ``episode_step`` ``[B]`` (default: the envs' current steps) drives the gait clock, when on.

        Returns:
            ``{"policy": [B, 9 + 3J (+ 2 clock)], "critic": [B, policy + 4 + 2F + J]}``; the critic's
            extra columns: body linear velocity (3), root height (1), foot contact and air time (F
            each), joint torque (J).
        """
        cfg = self.task_cfg
        gravity_b, lin_vel_b, ang_vel_b = terms.root_in_body(s.root_quat_w, s.root_lin_vel_w, s.root_ang_vel_w)
        policy = terms.policy_obs(
            ang_vel_b,
            gravity_b,
            command,
            s.joint_pos - self.nominal_joint_pos,
            s.joint_vel,
            last_action,
            cfg.obs_ang_vel_scale,
            cfg.obs_joint_vel_scale,
        )
        if cfg.gait_period_s is not None:
            step = self.episode_length_buf if episode_step is None else episode_step
            policy = torch.cat([policy, terms.clock_obs(terms.gait_phase(step, cfg.policy_dt, cfg.gait_period_s))], dim=-1)
        privileged = terms.critic_privileged(
            lin_vel_b,
            s.root_pos_w[:, 2],
            s.foot_contact,
            air_time,
            s.applied_torque,
            cfg.obs_torque_scale,
        )
        return {POLICY: policy, CRITIC: torch.cat([policy, privileged], dim=-1)}

    def current_observations(self) -> ObsGroups:
        """Observations of the current state (after ``reset`` or ``load_state_dict``)."""
        return self._get_observations()

    # -- episode ends --------------------------------------------------------------------------

    def _record_episode_end(self, ended: torch.Tensor) -> None:
        """Copy everything about the ending episodes (``ended``: a bool mask ``[N]`` or env ids
        ``[K]``) into buffers that survive the reset; call it after the final observations and
        before :meth:`_reset_idx`. Masked writes over every env: fixed shapes, no host sync."""
        done = self._as_mask(ended)
        kept = [(getattr(self.terminal_state, name), value) for name, value in self.state.as_dict().items()]
        kept += [(self.terminal_task["command"], self.command), (self.terminal_task["last_action"], self.last_action),
                 (self.terminal_task["air_time"], self.air_time), (self.last_cause, self.termination_cause),
                 (self.terminal_task["obs_history"], self.obs_history),
                 (self.terminal_task["obs_history_started"], self.obs_history_started),
                 (self.last_episode_length, self.episode_length_buf), (self.last_first_raw_step, self.first_raw_step),
                 (self.last_first_active_step, self.first_active_step)]
        for buffer, value in kept:
            put_rows(buffer, done, value)
        self.episodes_finished += done.to(self.episodes_finished.dtype)

        # rows that did not end may have 0 steps (0 / 0); where() drops them, clamp keeps them finite
        seconds = self.episode_length_buf.float().clamp_min(1.0) * self.task_cfg.policy_dt
        # the columns of last_episode_stats: length, then per-second rates (support times, touchdowns,
        # reward sums), all rows in one write
        totals = torch.cat((torch.stack((self.double_support_time, self.single_support_time,
                                         self.touchdown_count.sum(-1).float()), dim=-1),
                            self._reward_sums), dim=-1)
        put_rows(self._episode_stats, done, torch.cat((seconds.unsqueeze(-1), totals / seconds.unsqueeze(-1)), dim=-1))

    def terminal_observations(self, env_ids: torch.Tensor) -> ObsGroups:
        """Observations recomputed from the terminal snapshot of ``env_ids`` (their last ended episode);
        the policy's frame without noise, its history as the episode left it."""
        kept = self.terminal_task
        obs = self.observations_from(
            self.terminal_state.index(env_ids),
            kept["command"][env_ids],
            kept["last_action"][env_ids],
            kept["air_time"][env_ids],
            self.last_episode_length[env_ids],
        )
        if not self.obs_history.shape[1]:
            return obs
        return self._with_history(obs, kept["obs_history"][env_ids], kept["obs_history_started"][env_ids])

    def pre_reset_state(self, ended: torch.Tensor) -> tuple[PhysicsState, torch.Tensor]:
        """Every env as the last physics step left it, before any same-step reset: ``(state, command
        [N, 3])``. Rows ``ended`` ``[K]`` come from the terminal snapshot (their live rows already
        show the respawn); copies, so later steps do not change them."""
        state = PhysicsState(**{name: value.clone() for name, value in self.state.as_dict().items()})
        for name, value in state.as_dict().items():
            value[ended] = getattr(self.terminal_state, name)[ended]
        command = self.command.clone()
        command[ended] = self.terminal_task["command"][ended]
        return state, command

    def _step_log(self, truncated: torch.Tensor) -> dict[str, torch.Tensor]:
        """Scalars for ``info["log"]``: this step's episode ends by cause, and the share of envs below
        the evaluation height (on the post-step, pre-reset state).

        0-dim tensors on the env's device, so logging costs no host sync per step (the Runner reads
        them once per iteration).
        """
        cause = self.termination_cause
        log = {f"Episode_Termination/{CAUSE_NAMES[code]}": (cause == code).sum().float() for code in ENV_CAUSES}
        log["Episode_Termination/time_out_and_fall"] = (truncated & (cause != CAUSE_TIMEOUT)
                                                        & (cause != CAUSE_NON_FINITE)).sum().float()
        below = self.state.root_pos_w[:, 2] < self.task_cfg.eval_success_height
        log["Metrics/below_eval_success_height"] = below.float().mean()
        rand = self.task_cfg.randomization
        if rand.enabled:  # means of what is drawn now, 0-dim tensors like every other key
            log.update({f"Randomization/{name}": value.mean() for name, value in self.physics_params.items()})
            if rand.delayed:
                log["Randomization/action_delay_steps"] = self.action_delay.float().mean()
            if rand.pushes:
                pushed = (self.last_push != 0).any(-1).float()
                log["Randomization/pushes"] = pushed.sum()
                log["Randomization/push_speed"] = (self.last_push.norm(dim=-1) * pushed).sum() / pushed.sum().clamp_min(1.0)
        if self.task_cfg.reward_ramps:  # the ramped weights of this step's reward, 0-dim tensors
            weights = self._reward_weights()
            log.update({f"Curriculum/{r.term}": weights[self._reward_names.index(r.term)]
                        for r in self.task_cfg.reward_ramps})
        return log

    def _last_episode_log(self) -> dict[str, torch.Tensor]:
        """Means over every env's most recent finished episode (0 until some env has finished one),
        so each key is present at every step and averaging over steps stays a plain mean."""
        finished = (self.episodes_finished > 0).float()
        count = finished.sum().clamp_min(1.0)
        means = (self._episode_stats * finished.unsqueeze(-1)).sum(0) / count  # every key in 3 ops
        return dict(zip(self.last_episode_stats, means.unbind(0)))

    # -- commands ------------------------------------------------------------------------------

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

    def _command_ranges(self) -> torch.Tensor:
        """``[3, 2]`` (low, high) of v_x, v_y, w_z on the device; uploaded again (without a host
        sync) only when the config's ranges change."""
        cfg = self.task_cfg
        key = (tuple(cfg.lin_vel_x_range), tuple(cfg.lin_vel_y_range), tuple(cfg.ang_vel_z_range))
        if key != self._command_ranges_key:
            self._command_ranges_tensor = upload_without_sync(key, self.device)
            self._command_ranges_key = key
        return self._command_ranges_tensor

    def _sample_commands(self, k: int) -> torch.Tensor:
        """``[k, 3]`` commands, uniform in the ranges; with ``rel_standing_envs`` each is (0, 0, 0)
        with that probability (a second draw, made only when the share is not 0)."""
        cfg = self.task_cfg
        ranges = self._command_ranges()
        u = torch.rand(k, 3, device=self.device, generator=self.generator)
        commands = ranges[:, 0] + u * (ranges[:, 1] - ranges[:, 0])
        if cfg.rel_standing_envs > 0:
            standing = torch.rand(k, device=self.device, generator=self.generator) < cfg.rel_standing_envs
            commands = torch.where(standing.unsqueeze(-1), torch.zeros_like(commands), commands)
        return commands

    def _sample_command_steps(self, k: int) -> torch.Tensor:
        """``[k]`` long: policy steps (>= 1) to hold a new command, uniform in ``resampling_time_range``."""
        return self._sample_hold_steps(k, self.task_cfg.resampling_time_range)

    def _sample_hold_steps(self, k: int, seconds: tuple[float, float]) -> torch.Tensor:
        """``[k]`` long: policy steps (>= 1) of a time drawn uniformly in ``seconds`` ``(min, max)``."""
        lo, hi = seconds
        u = torch.rand(k, device=self.device, generator=self.generator)
        return ((lo + u * (hi - lo)) / self.task_cfg.policy_dt).round().long().clamp_min(1)

    def _resample_due_commands(self) -> None:
        """With ``resampling_time_range``: a new command (and hold time) for every env whose hold
        time ran out this step; envs that ended this step get theirs from the reset.

        Draws for every env and selects with ``torch.where``: no data-dependent shapes, no host
        synchronisation; commands held by :meth:`set_commands` stay.
        """
        if self.task_cfg.resampling_time_range is None:
            return
        n = self.num_envs
        self.command_steps_left -= 1
        due = (self.command_steps_left <= 0) & ~(self.reset_terminated | self.reset_time_outs)
        sampled = self._sample_commands(n)
        steps = self._sample_command_steps(n)
        new = sampled if self.held_command is None else self.held_command
        put_rows(self.command, due, new)
        put_rows(self.command_steps_left, due, steps)

    # -- checkpointing ---------------------------------------------------------------------------

    def _task_state_dict(self) -> dict[str, Any]:
        """Task buffers, terminal snapshot and the generator (the simulator's rows are the env's to add)."""
        return {
            "buffers": {name: getattr(self, name).clone() for name in _BUFFERS},
            "episode_sums": {k: v.clone() for k, v in self.episode_sums.items()},
            "last_episode_stats": {k: v.clone() for k, v in self.last_episode_stats.items()},
            "terminal_state": {k: v.clone() for k, v in self.terminal_state.as_dict().items()},
            "terminal_task": {k: v.clone() for k, v in self.terminal_task.items()},
            "generator": self.generator.get_state(),
            "held_command": None if self.held_command is None else self.held_command.clone(),
            "common_step_counter": self.common_step_counter,
            "physics_params": {k: v.clone() for k, v in self.physics_params.items()},
        }

    def _load_task_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`_task_state_dict`; the simulator's rows must be loaded first (:attr:`state` is read again)."""
        for name, value in state["buffers"].items():
            setattr(self, name, value.clone().to(self.device))
        # into the columns (the dicts hold views of one matrix each); a term this version no longer
        # has is dropped, one it added since keeps zeros
        for saved, columns in ((state["episode_sums"], self.episode_sums),
                               (state["last_episode_stats"], self.last_episode_stats)):
            for name, value in saved.items():
                if name in columns:
                    columns[name].copy_(value)
        self.terminal_state = PhysicsState(**{k: v.clone().to(self.device) for k, v in state["terminal_state"].items()})
        # a snapshot saved before a history existed keeps this env's (empty) history entries
        self.terminal_task.update({k: v.clone().to(self.device) for k, v in state["terminal_task"].items()})
        self.generator.set_state(state["generator"].cpu())  # a map_location may have moved it
        held = state.get("held_command")
        self.held_command = None if held is None else held.clone().to(self.device)
        self.common_step_counter = int(state.get("common_step_counter", 0))  # older files: 0
        for name, value in state.get("physics_params", {}).items():
            if name in self.physics_params:
                self.physics_params[name].copy_(value)
        if self.physics_params:  # the simulator's model rows follow the restored draws
            self._write_physics_params(torch.ones(self.num_envs, dtype=torch.bool, device=self.device),
                                       self.physics_params)
        self.state = self._read_robot_state()

    # -- symmetry --------------------------------------------------------------------------------

    @property
    def symmetry(self) -> Symmetry:
        """The task's left-right mirror of its observation groups and actions (:mod:`.symmetry`),
        which the Runner reads for PPO's symmetry augmentation and mirror loss."""
        from isaac_adapter.tasks.g1_walk.symmetry import g1_symmetry

        return g1_symmetry(self.task_cfg, self.joint_names, self.nominal_joint_pos)
