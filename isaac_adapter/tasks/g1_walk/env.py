"""The G1 velocity-walking task on an embedded physics backend, producing :class:`ppo_bootstrap.env.StepResult`.

:class:`G1WalkEnv` is a thin layer over a :class:`~isaac_adapter.backends.base.PhysicsBackend`
(MuJoCo on CPU threads, or MuJoCo Warp): the task itself, its buffers and the ``DirectRLEnv`` hooks
are :class:`~isaac_adapter.tasks.g1_walk.task.G1WalkTask`; this class supplies the simulator seam
(read the robot state, write reset rows, hold joint targets for ``decimation`` substeps) and runs
``step`` in ``DirectRLEnv.step``'s order, with a same-step auto-reset of the ended envs only. The
reset goes by mask and the step returns the dense form of the final observations
(``final_obs_all``), so on a GPU a step never waits for the device to learn which envs ended
(``validate_actions = False`` also drops the per-step finiteness check of the actions).

Episode ends (see :mod:`.config` for the step arithmetic):

* ``terminated`` (a fall): root height from step 1, tilt and lateral velocity after their grace
  windows. The exclusive cause follows priority height > tilt > lateral.
* ``truncated`` (timeout): set at episode step ``max_episode_length`` (1000 at 50 Hz / 20 s), whether
  or not the robot also fell on that step; both flags are reported honestly and the library's rule
  "terminated wins" decides the value target. ``termination_cause`` then says the fall.

``info`` per step: ``"termination_cause"`` ``[N]`` long (codes of :mod:`.causes`: 0 running,
1 height, 2 tilt, 3 lateral, 4 timeout), ``"time_outs"`` ``[N]`` bool, and ``"log"`` scalars
(episode ends by cause this step, statistics of the last finished episodes: length, support ratios,
step frequency, reward terms).
"""

from __future__ import annotations

from typing import Any

import torch

from ppo_bootstrap.env import ObsGroups, StepResult, check_actions
from ppo_bootstrap.episode import done_mask, end_blow_ups

from isaac_adapter.backends.base import PhysicsBackend, PhysicsState
from isaac_adapter.tasks.g1_walk.config import G1WalkConfig
from isaac_adapter.tasks.g1_walk.graph_step import StepGraph
from isaac_adapter.tasks.g1_walk.task import G1WalkTask


Backend = tuple[PhysicsBackend, torch.Tensor, tuple[str, ...]]
"""What a backend factory returns: the backend, the nominal ``qpos`` ``[7 + J]`` and the joint names."""


def _g1_robot() -> tuple[Any, dict[str, Any]]:
    """The asset module and the names a backend needs to find the G1's root, feet and sensors."""
    from isaac_adapter.tasks.g1_walk import assets

    return assets, assets.backend_names()


def make_mujoco_backend(cfg: G1WalkConfig) -> Backend:
    """The embedded default: MuJoCo on all CPU cores."""
    from isaac_adapter.backends.mujoco_cpu import MujocoCpuBackend

    assets, names = _g1_robot()
    g1 = assets.build_task_model(cfg)
    backend = MujocoCpuBackend(g1.model, cfg.num_envs, cfg.decimation, nthread=cfg.physics_threads, **names)
    return backend, torch.tensor(g1.nominal_qpos, dtype=torch.float32), g1.joint_names


def make_warp_backend(cfg: G1WalkConfig, **kwargs: Any) -> Backend:
    """MuJoCo Warp on ``cfg.device`` (a GPU, or Warp's CPU device): the same compiled model as the
    CPU default. ``kwargs`` go to :class:`~isaac_adapter.backends.mujoco_warp.MujocoWarpBackend`
    (``nconmax``, ``njmax``, ``check_every``, ...); ``nconmax`` / ``njmax`` / ``convex_box_box`` /
    ``compile_workers`` / ``compile_processes`` default to the config's ``warp_nconmax`` / ``warp_njmax`` /
    ``warp_box_box`` / ``warp_compile_workers`` / ``warp_compile_via``."""
    from isaac_adapter.backends.mujoco_warp import MujocoWarpBackend

    assets, names = _g1_robot()
    g1 = assets.build_task_model(cfg)
    kwargs = {"nconmax": cfg.warp_nconmax, "njmax": cfg.warp_njmax, "compile_workers": cfg.warp_compile_workers,
              "compile_processes": cfg.warp_compile_via == "processes", "convex_box_box": cfg.warp_box_box == "convex",
              "randomized": cfg.randomization.physics, **kwargs}
    backend = MujocoWarpBackend(g1.model, cfg.num_envs, cfg.decimation, device=cfg.device, **names, **kwargs)
    return backend, torch.tensor(g1.nominal_qpos, dtype=torch.float32), g1.joint_names


BACKENDS = {"mujoco": make_mujoco_backend, "warp": make_warp_backend}


class G1WalkEnv(G1WalkTask):
    """``num_envs`` G1 robots following velocity commands. Implements :class:`ppo_bootstrap.env.VecEnv`.

    Args:
        cfg: task configuration (validated on construction).
        backend: ``"mujoco"`` (embedded CPU default), ``"warp"``, or a ready :class:`PhysicsBackend`.
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
        if len(joint_names) != backend.num_joints:
            raise ValueError(f"{len(joint_names)} joint names for a backend of {backend.num_joints} joints")
        self.backend = backend
        self.num_links = getattr(backend, "num_links", 0)  # bodies whose mass a randomization scales
        self.device = torch.device(cfg.device)
        self.num_envs = cfg.num_envs
        self.num_actions = backend.num_joints
        self.dt = cfg.policy_dt
        self.max_episode_length = cfg.max_episode_length
        # this step's episode ends, as DirectRLEnv names them
        self.reset_terminated = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        self.reset_time_outs = torch.zeros_like(self.reset_terminated)
        # step() checks that actions are finite, a host synchronisation per step on a GPU; a trainer
        # that trusts its policy (examples/g1_walk.py --no-validate) turns it off
        self.validate_actions = True
        # record the whole step in one CUDA graph and replay it (MuJoCo Warp on CUDA; .graph_step)
        self.cuda_graph = False
        self._step_graph: StepGraph | None = None
        self._init_task(cfg, nominal_qpos, tuple(joint_names), backend.num_feet)

    # -- VecEnv --------------------------------------------------------------------------------

    def reset(self, seed: int | None = None) -> ObsGroups:
        """Reset every env (reseeding the task's generator first when ``seed`` is given); return
        the initial observation groups."""
        if seed is not None:
            self.generator.manual_seed(seed)
        self._reset_idx(torch.arange(self.num_envs, device=self.device))
        return self._keep_observations(self._get_observations())

    def _keep_observations(self, obs: ObsGroups) -> ObsGroups:
        """Remember ``obs``, what the policy acts on next (the ``s_t`` a blow-up is valued from), in
        place: a recorded step graph keeps reading the same buffers. Returns ``obs``."""
        kept = getattr(self, "acted_on_obs", None)
        if kept is None or {k: v.shape for k, v in kept.items()} != {k: v.shape for k, v in obs.items()}:
            self.acted_on_obs = {k: v.clone() for k, v in obs.items()}
        else:
            for k, v in obs.items():
                kept[k].copy_(v)
        return obs

    def step(self, actions: torch.Tensor) -> StepResult:
        """Apply ``actions`` ``[N, J]`` (joint offsets in units of ``action_scale``) for one policy step.

        With :attr:`cuda_graph` set, the step is recorded once in a CUDA graph and replayed
        (:mod:`.graph_step`); its result is then a copy of the graph's outputs.
        """
        actions = check_actions(actions, self.num_envs, self.num_actions, self.device, finite=self.validate_actions)
        self.common_step_counter += 1
        if self.cuda_graph:
            self._step_graph = self._step_graph or self._new_step_graph()
            return self._step_graph.step(actions)
        if self._step_graph is not None:
            self._step_graph.release()
            self._step_graph = None
        return self._step_body(actions)

    def _new_step_graph(self) -> StepGraph:
        backend = self.backend
        if self.device.type != "cuda" or not hasattr(backend, "on_torch_stream"):
            raise ValueError(f"cuda_graph: the G1 env's step is recorded only on the MuJoCo Warp backend on CUDA; "
                             f"this env runs {type(backend).__name__} on {self.device}; set env.cuda_graph = False")
        return StepGraph(self, self._step_body, backend.on_torch_stream, backend.after_step)

    def _step_body(self, actions: torch.Tensor) -> StepResult:
        """The step's device work and its Python, in ``DirectRLEnv.step``'s order (what a graph records)."""
        self._pre_physics_step(actions)
        self._apply_action()
        self.episode_length_buf += 1
        # fresh tensors every step: the StepResult keeps them; a blow-up (non-finite state) comes as
        # truncated, cause non_finite
        self.reset_terminated, self.reset_time_outs = self._get_dones()
        terminated, truncated = self.reset_terminated, self.reset_time_outs
        reward = self._get_rewards()
        obs = self._get_observations()

        log = self._step_log(truncated)
        # every env's pre-reset observation is the final one of those that ended (the dense form of
        # the contract): the reset goes by mask, so no step waits on the GPU to learn which ended
        final_obs_all = obs
        done = done_mask(terminated, truncated)
        self._record_episode_end(done)
        self._reset_idx(done)
        obs = self._get_observations()

        log.update(self._last_episode_log())
        info: dict[str, Any] = {
            "log": log,
            "termination_cause": self.termination_cause.clone(),
            "time_outs": truncated,
        }
        result = StepResult(obs, reward, terminated, truncated, None, None, info, final_obs_all=final_obs_all)
        # blow-ups: valued from the observation acted on, reward zeroed (the rule of ppo_bootstrap.episode)
        result = end_blow_ups(result, self.acted_on_obs, self.non_finite)
        self._keep_observations(obs)
        return result

    # -- the simulator seam --------------------------------------------------------------------

    def _apply_action(self) -> None:
        """Hold :attr:`joint_pos_target` for ``decimation`` physics substeps of ``sim_dt``.

        Isaac Lab calls ``_apply_action`` before each substep and steps the simulation itself; a
        backend's ``step`` is that whole loop.
        """
        self.backend.step(self.joint_pos_target.to(self.backend.device))

    def _read_robot_state(self) -> PhysicsState:
        s = self.backend.state()
        if s.root_pos_w.device != self.device:
            s = PhysicsState(**{k: v.to(self.device) for k, v in s.as_dict().items()})
        return s

    def _write_reset_rows(self, env_ids: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        physics = self.backend.device
        self.backend.reset_envs(env_ids.to(physics), qpos.to(physics), qvel.to(physics))

    def _write_reset_rows_masked(self, mask: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        # a backend that resets by mask (MuJoCo Warp) needs no nonzero; any other takes the task's ids route
        masked = getattr(self.backend, "reset_envs_masked", None)
        if masked is None:
            super()._write_reset_rows_masked(mask, qpos, qvel)
            return
        physics = self.backend.device
        masked(mask.to(physics), qpos.to(physics), qvel.to(physics))

    def _write_physics_params(self, mask: torch.Tensor, params: dict[str, torch.Tensor]) -> None:
        physics = self.backend.device
        self.backend.set_physics_params(mask.to(physics), {k: v.to(physics) for k, v in params.items()})

    def _push_root_velocity(self, mask: torch.Tensor, delta: torch.Tensor) -> None:
        physics = self.backend.device
        self.backend.add_root_velocity(mask.to(physics), delta.to(physics))

    # -- checkpointing ---------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """Physics rows, task buffers and the generator: enough to continue bit for bit."""
        return {"physics": self._physics_signature(), "backend": self.backend.state_dict(), **self._task_state_dict()}

    def _physics_signature(self) -> dict[str, Any]:
        cfg = self.cfg
        return {"model_variant": cfg.model_variant, "sim_dt": cfg.sim_dt, "decimation": cfg.decimation,
                "num_envs": cfg.num_envs, "backend": type(self.backend).__name__}

    def check_state_dict(self, state: dict[str, Any]) -> None:
        """Raise ``ValueError`` unless ``state`` was saved by an env of this model, timing, size and
        backend (physics rows of another model would load silently and continue nonsense)."""
        saved, current = state.get("physics"), self._physics_signature()
        if saved is not None and saved != current:
            raise ValueError(f"env state was saved for {saved}, this env is {current}")

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.check_state_dict(state)
        self.backend.load_state_dict(state["backend"])
        self._load_task_state_dict(state)
        # what the policy acts on next, for a blow-up's value (the critic's group: no noise); the noise
        # it draws must not move the random stream, nor its frame replace the one the policy was shown
        # (the runner acts on the observation it saved, and that frame joins the history)
        generator, frame = self.generator.get_state(), self.policy_frame.clone()
        self.current_observations()
        self.generator.set_state(generator)
        self.policy_frame.copy_(frame)

    def current_observations(self) -> ObsGroups:
        """Observations of the current state (after ``reset``, ``load_state_dict`` or ``set_commands``),
        remembered as what the policy acts on next."""
        return self._keep_observations(super().current_observations())
