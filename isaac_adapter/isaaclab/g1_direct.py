"""The project's G1 walking task as a real Isaac Lab ``DirectRLEnv`` (kit-less, Newton / MuJoCo-Warp).

:class:`G1WalkDirectEnv` is :class:`~isaac_adapter.tasks.g1_walk.task.G1WalkTask` (buffers, term
functions, fall rules with grace windows, causes, terminal snapshot, logs: the same code the MuJoCo
backends run) mixed into Isaac Lab's ``DirectRLEnv``, which steps it in its own order. This module
supplies only the simulator seam:

* ``_read_robot_state``: Isaac Lab's articulation data and foot contact sensor as the task's
  :class:`~isaac_adapter.backends.base.PhysicsState` (quaternions ``(x, y, z, w)`` -> ``(w, x, y, z)``,
  positions relative to each env's origin, joints in the MuJoCo model's actuator order);
* ``_write_reset_rows``: a spawn pose into the rows of ``env_ids`` only;
* ``_apply_action``: the task's joint-position targets to the implicit PD drives;
* ``_write_physics_params`` / ``_push_root_velocity``: the task's domain randomization
  (``task.randomization``) through the articulation's setters: link masses, the base's centre of
  mass, joint armature and friction, drive stiffness and damping, root velocity; foot-ground
  friction into the friction of the foot colliders' shapes (the floor colliders outrank the
  ground, so theirs is the contact's, as the MuJoCo model's foot-floor pairs say). The values then
  go straight into the solver's per-world MuJoCo Warp model (:func:`copy_into_solver`), not
  through Newton's model update: that one derives MuJoCo's constants (``body_invweight0``,
  ``dof_invweight0``, ``actuator_acc0``) again from the drawn values, which the MuJoCo backends keep
  nominal, and costs some 40 ms a step in host reads and ~640 launches. Both are device work
  only, so a step that draws them is recorded in the step's CUDA graph like any other.

The robot is the USD made from the same MuJoCo model the task trains on, with that model's drives
(:func:`~isaac_adapter.isaaclab.robot.g1_articulation_cfg` ``drives="task"``), and the observation
layout is the task's, so a policy moves between MuJoCo CPU, MuJoCo Warp and Isaac Lab.

Episode ends: the task's ``_get_dones`` gives ``(terminated, time_out)``; only the ended envs are
reset, after their final observation is computed. The terminal snapshot is recorded in ``_reset_idx``
when it is called from inside ``step``. Two ways to reset, picked by ``cfg.reset_by_mask``:

* by mask (the default): ``_reset_envs_from_buffer`` computes every env's observation before the
  reset into ``extras["final_obs"]`` and resets the rows of ``reset_buf`` through Isaac Lab's mask
  writes, so a step needs no ``nonzero`` and no host synchronisation; the env then reports
  :attr:`G1WalkDirectEnv.final_obs_every_step` and the adapter passes the final observations on in
  the dense form (``final_obs_all``), without a ``nonzero`` of its own either;
* by ids: Isaac Lab's own path (``reset_buf.nonzero()``, ``cfg.compute_final_obs``), one host
  synchronisation per step.

With :attr:`G1WalkDirectEnv.cuda_graph` set (and the reset by mask), ``step`` is Isaac Lab's
``DirectRLEnv.step`` recorded once in a torch CUDA graph and replayed, Newton's physics included
(:class:`~isaac_adapter.tasks.g1_walk.graph_step.StepGraph`, the recorder of the MuJoCo Warp env):
while torch records, Newton runs its decimation loop eagerly on torch's stream instead of launching
its own Warp graph (a Warp graph cannot be launched inside a torch capture), and after each replay
the host counters that the skipped Python would have advanced are advanced.

With ``task.warp_compile_workers`` N > 0 the env first loads the modules of import-time kernels
that its build and its step launch (:data:`PRELOADED_MODULES`), N at a time, before Isaac Lab builds
the scene; after the build it runs one physics step with every Warp launch recorded instead of run
and compiles what else it named (the model's own kernels) N at a time before the first real step
(:meth:`G1WalkDirectEnv.compile_physics_ahead`); what Newton's Python keeps about that step is then
put back, so the steps after are the same as without it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from isaac_adapter.isaaclab.robot import (
    as_torch,
    feet_in_contact,
    filter_from_ground,
    g1_articulation_cfg,
    quat_wxyz,
    require_isaaclab,
    root_quat_wxyz,
)
from isaac_adapter.tasks.g1_walk import assets, terms
from isaac_adapter.tasks.g1_walk.config import G1WalkConfig
from isaac_adapter.tasks.g1_walk.graph_step import StepGraph
from isaac_adapter.tasks.g1_walk.task import G1WalkTask

require_isaaclab()

import isaaclab.sim as sim_utils  # noqa: E402
import mujoco  # noqa: E402
import warp as wp  # noqa: E402
from isaaclab.assets import ArticulationCfg, AssetBaseCfg  # noqa: E402
from isaaclab.envs import DirectRLEnv, DirectRLEnvCfg  # noqa: E402
from isaaclab.physics import PhysicsEvent  # noqa: E402
from isaaclab.physics.physics_manager import PhysicsManager  # noqa: E402
from isaaclab.scene import InteractiveSceneCfg  # noqa: E402
from isaaclab.sensors import ContactSensorCfg  # noqa: E402
from isaaclab.sim import SimulationCfg  # noqa: E402
from isaaclab.utils import configclass  # noqa: E402
from isaaclab_newton.physics import MJWarpSolverCfg, NewtonBuilderCfg, NewtonCfg, NewtonManager  # noqa: E402

from isaac_adapter.backends.base import PhysicsState  # noqa: E402
from isaac_adapter.backends.warp_stream import (  # noqa: E402
    compile_recorded,
    launches_recorded,
    preload_modules,
    python_attributes_restored,
    warp_on_torch_stream,
)
from isaac_adapter.math import quat_apply  # noqa: E402

TASK_ID = "G1-Walk-Direct-Isaac"

# The Python modules whose Warp kernels a cold build and first step of this env compile one after the
# other, and which keep those kernels while it runs (Isaac Lab 3.0, Newton 1.6, MuJoCo Warp 3.12; read
# from a cold start's Warp log). Left out: Newton's MuJoCo solver kernels and Isaac Lab's joint
# ordering kernels, which gain a kernel or an overload during the build, and the model's own kernels.
PRELOADED_MODULES = (
    "mujoco_warp._src.smooth", "mujoco_warp._src.io", "mujoco_warp._src.sensor", "mujoco_warp._src.passive",
    "mujoco_warp._src.derivative", "mujoco_warp._src.forward", "mujoco_warp._src.solver",
    "mujoco_warp._src.support", "mujoco_warp._src.constraint",
    "newton._src.sim.articulation", "newton._src.utils.selection", "newton._src.geometry.bvh",
    "newton._src.sensors.sensor_contact", "newton._src.geometry.narrow_phase", "newton._src.sim.collide",
    "newton._src.geometry.broad_phase_nxn",
    "isaaclab_newton.assets.kernels", "isaaclab_newton.assets.articulation.kernels",
    "isaaclab_newton.sensors.contact_sensor.contact_sensor_kernels", "isaaclab.sensors.kernels",
    "isaaclab.actuators.actuator_kernels",
)


def mujoco_solver_options(model: Any) -> dict[str, Any]:
    """The constraint solver's options of a compiled ``MjModel`` in ``MJWarpSolverCfg``'s terms.

    :meth:`G1WalkDirectEnvCfg.from_task` takes the integrator, cone, impratio, solver and tolerance
    (1e-8 in the model; MuJoCo Warp raises it to its float32 floor, 1e-6, here as on the Warp
    backend). The iteration budget it takes only when the task sets one: the model's 5 and 8 made
    the step three times slower here (``benchmarks/isaaclab_step.py --solver-iterations``), so by
    default the solver keeps Isaac Lab's 100 and 50 and converges.
    """
    opt = model.opt
    return {"iterations": int(opt.iterations), "ls_iterations": int(opt.ls_iterations),
            "tolerance": float(opt.tolerance), "impratio": float(opt.impratio),
            "integrator": assets.option_name(mujoco.mjtIntegrator, opt.integrator),
            "cone": assets.option_name(mujoco.mjtCone, opt.cone),
            "solver": assets.option_name(mujoco.mjtSolver, opt.solver)}


def warp_mask(mask: torch.Tensor) -> Any:
    """``[N]`` bool as the ``wp.array`` Isaac Lab's ``*_mask`` setters and resets take (shares memory)."""
    return wp.from_torch(mask.contiguous(), dtype=wp.bool)


def apply_pending_model_changes() -> set:
    """Hand the model changes Isaac Lab has queued for the next physics step to Newton's solver now;
    returns what is left to queue (a copy): nothing, or all of it while there is no solver yet.
    (Newton manager's queue is private; Isaac Lab 3.0 drains it the same way at the start of a step.)"""
    changes, solver = NewtonManager._model_changes, NewtonManager._solver
    if solver is None:  # the solver, when built, starts from the model
        return set(changes)
    with wp.ScopedDevice(PhysicsManager._device):
        for change in changes:
            solver.notify_model_changed(change)
    return set()


def copy_into_solver(params: dict[str, torch.Tensor]) -> None:
    """Copy Newton's model values of the drawn physical parameters (names of ``params``, see
    ``randomization.PHYSICS_PARAMS``) into the solver's per-world MuJoCo Warp model, with the
    solver's own copy kernels and index maps, and the subtree masses the masses change: what
    Newton's model update does, less its re-derivation of MuJoCo's constants from the new values
    (``set_const_0``: host reads and ~640 launches a call). The MuJoCo backends keep those constants
    nominal too. Every call here launches device kernels only."""
    solver = NewtonManager._solver
    if solver is None:  # not built yet: it will start from the model
        return
    bodies = "link_mass_scale" in params or "base_com_offset" in params
    dofs = any(name in params for name in ("armature_scale", "joint_friction_scale", "kp_scale", "kd_scale"))
    # private methods of Newton 1.6's MuJoCo solver, the ones its notify_model_changed calls
    with wp.ScopedDevice(PhysicsManager._device), solver._scoped_mujoco_warp_execution():
        if bodies:
            solver._update_model_inertial_properties()  # masses, centres of mass, inertias
            solver._mujoco_warp.set_const_fixed(solver.mjw_model, solver.mjw_data)  # subtree masses
        if dofs:
            solver._update_joint_dof_properties()  # armature, friction loss, the drives' gains
        if "friction" in params:
            solver._update_geom_properties()
        # contacts the solver cached from the old values are converted again
        solver._invalidate_contact_fast_path()


@configclass
class G1WalkSceneCfg(InteractiveSceneCfg):
    ground = AssetBaseCfg(prim_path="/World/ground", spawn=sim_utils.GroundPlaneCfg())
    robot: ArticulationCfg = None  # type: ignore[assignment]  (set by G1WalkDirectEnvCfg.from_task)
    # the converted USD nests bodies (Robot/Geometry/pelvis/.../left_ankle_roll_link)
    feet_contact = ContactSensorCfg(prim_path="{ENV_REGEX_NS}/Robot/.*_ankle_roll_link", history_length=1)


@configclass
class G1WalkDirectEnvCfg(DirectRLEnvCfg):
    """Isaac Lab's side of the task; the task's own numbers come from a :class:`G1WalkConfig`
    (:meth:`from_task`), so both simulators read one definition."""

    decimation: int = 4
    episode_length_s: float = 20.0
    action_space: int = 29
    observation_space: int = 96
    state_space: int = 0
    sim: SimulationCfg = SimulationCfg(
        dt=0.005,
        render_interval=4,
        # from_task sets the solver's options (integrator, cone, iterations, ...) from the MuJoCo model
        physics=NewtonCfg(
            solver_cfg=MJWarpSolverCfg(njmax=200, nconmax=32, cone="pyramidal", impratio=1.0,
                                       integrator="implicitfast", use_mujoco_contacts=False),
            num_substeps=1,
        ),
    )
    scene: G1WalkSceneCfg = G1WalkSceneCfg(num_envs=4096, env_spacing=2.5, replicate_physics=True)
    # the env writes extras["final_obs"] itself when it resets by mask (Isaac Lab's flag asks for ids)
    reset_by_mask: bool = True
    compute_final_obs: bool = False
    # the MuJoCo model the robot's drives and self-collisions come from (robot.author_self_collisions)
    model_variant: str = "menagerie_mjx"
    self_collisions: bool = False

    @classmethod
    def from_task(cls, task: G1WalkConfig, device: str | None = None, reset_by_mask: bool = True) -> "G1WalkDirectEnvCfg":
        """An env cfg with ``task``'s envs, device, time step, decimation, episode length, robot and
        the MuJoCo model's solver options (:func:`mujoco_solver_options` says which); ``reset_by_mask``:
        see the module docstring."""
        cfg = cls()
        g1 = assets.build_task_model(task)
        options = mujoco_solver_options(g1.model)
        if task.solver_iterations is None and task.ls_iterations is None:
            # Newton prints a warning from every step that ends at the iteration limit: with the
            # model's budget a step took 27.2 ms at 4,096 envs on an H200, against 9.6 ms converged
            del options["iterations"], options["ls_iterations"]
        for name, value in options.items():
            setattr(cfg.sim.physics.solver_cfg, name, value)
        cfg.reset_by_mask = reset_by_mask
        cfg.scene.num_envs = task.num_envs
        cfg.model_variant, cfg.self_collisions = task.model_variant, task.model_self_collisions
        cfg.scene.robot = g1_articulation_cfg(drives="task", model_variant=task.model_variant,
                                              self_collisions=task.model_self_collisions)
        cfg.sim.device = device or task.device
        cfg.sim.dt = task.sim_dt
        cfg.sim.render_interval = task.decimation
        cfg.decimation = task.decimation
        cfg.episode_length_s = task.episode_length_s
        cfg.seed = task.seed
        cfg.compute_final_obs = not cfg.reset_by_mask
        frame = terms.policy_frame_width(cfg.action_space, task.gait_period_s is not None)
        cfg.observation_space = frame * task.policy_obs_frames
        return cfg


def check_task(task: G1WalkConfig) -> None:
    """Raise ``ValueError`` (one line) for a task setting that only the project's own MuJoCo Warp
    backend has; the command line asks before it builds anything."""
    if task.warp_compile_via != "threads":
        raise ValueError(f"env.warp_compile_via={task.warp_compile_via!r} is MuJoCo Warp's (--sim warp); Isaac Lab "
                         "compiles with threads: leave it at 'threads'")


class G1WalkDirectEnv(G1WalkTask, DirectRLEnv):
    """The G1 walking task on Isaac Lab. Adapt it with
    :class:`~isaac_adapter.adapters.isaaclab.IsaacLabVecEnv` for ``Runner``.

    Args:
        cfg: Isaac Lab cfg, usually :meth:`G1WalkDirectEnvCfg.from_task`.
        task: the task's configuration (the one the MuJoCo env takes).
    """

    cfg: G1WalkDirectEnvCfg

    def __init__(self, cfg: G1WalkDirectEnvCfg, task: G1WalkConfig, render_mode: str | None = None, **kwargs: Any):
        task.validate()
        check_task(task)
        if abs(cfg.sim.dt * cfg.decimation - task.policy_dt) > 1e-12 or cfg.episode_length_s != task.episode_length_s:
            raise ValueError("cfg and task disagree on the policy step or the episode length; build cfg with from_task")
        self._stepping = False
        workers = task.warp_compile_workers
        self.preloaded_modules = preload_modules(PRELOADED_MODULES, cfg.sim.device, workers) if workers else {}
        DirectRLEnv.__init__(self, cfg, render_mode, **kwargs)
        if self.max_episode_length != task.max_episode_length:
            raise ValueError(f"Isaac Lab counts {self.max_episode_length} steps per episode, the task {task.max_episode_length}")
        if task.solver_iterations is not None or task.ls_iterations is not None:
            # a budget the task sets is meant to be used up: MuJoCo Warp would print a line from every
            # world whose solve ends at it, every substep (as the Warp backend, print no overflow)
            solver_model = getattr(NewtonManager._solver, "mjw_model", None)
            if solver_model is not None:
                solver_model.opt.warn_overflow = False
        g1 = assets.build_g1_model(task.model_variant, task.sim_dt)
        self.robot = self.scene["robot"]
        self.feet_contact = self.scene["feet_contact"]
        self._joint_ids = self.robot.find_joints(list(g1.joint_names), preserve_order=True)[0]
        self._foot_ids = self.robot.find_bodies(list(assets.FEET), preserve_order=True)[0]
        self._contact_ids = self.feet_contact.find_bodies(list(assets.FEET), preserve_order=True)[0]
        # the same ids as device tensors for indexing torch data: a Python list index is uploaded to the
        # GPU on every use, a host sync each (Isaac Lab's own *_index methods take the lists)
        self._joint_index, self._foot_index, self._contact_index = (
            torch.as_tensor(ids, dtype=torch.long, device=self.device)
            for ids in (self._joint_ids, self._foot_ids, self._contact_ids))
        # Isaac Lab turns a list of joint ids into a new device array on every call (an upload a
        # recorded graph cannot hold): the drives' targets are written through this one
        self._joint_ids_wp = wp.array(self._joint_ids, dtype=wp.int32, device=self.device)
        limits = as_torch(self.robot.data.joint_pos_limits)[0, self._joint_index]  # [J, 2]
        self._target_low, self._target_high = limits[:, 0], limits[:, 1]
        self._link_ids = self.robot.find_bodies([g1.model.body(b).name for b in range(1, g1.model.nbody)],
                                                preserve_order=True)[0]
        self._base_id = self.robot.find_bodies([assets.backend_names()["root_body"]], preserve_order=True)[0]
        self._link_index, self._base_index = (torch.as_tensor(ids, dtype=torch.long, device=self.device)
                                              for ids in (self._link_ids, self._base_id))
        self.num_links = len(self._link_ids)
        # the foot colliders' shapes (the MuJoCo model's foot-floor pairs): their friction is the
        # foot-ground contact's, as the pairs' priority over the ground makes it
        view, model = self.robot._root_view, g1.model
        feet = {model.body(name).id for name in assets.FEET}
        foot_floor = assets.contact_pairs(model).floor & {model.geom(g).name for g in range(model.ngeom)
                                                           if int(model.geom_bodyid[g]) in feet}
        self._foot_friction_cols = torch.as_tensor(sorted(view.shape_names.index(name) for name in foot_floor),
                                                   dtype=torch.long, device=self.device)
        # [N, shapes]: Newton's shape friction of each env's robot, a view that writes into the model
        self._shape_friction = wp.to_torch(view.get_attribute("shape_material_mu", NewtonManager.get_model())[:, 0])
        d = self.robot.data  # the nominal values the randomization scales
        self._nominal = {
            "mass": as_torch(d.body_mass).clone(), "com": as_torch(d.body_com_pose_b).clone(),
            "inertia": as_torch(d.body_inertia).clone(),
            "armature": as_torch(d.joint_armature).clone(), "friction": as_torch(d.joint_friction_coeff).clone(),
            "stiffness": as_torch(d.joint_stiffness).clone(), "damping": as_torch(d.joint_damping).clone(),
        }
        self._init_task(task, torch.tensor(g1.nominal_qpos, dtype=torch.float32), g1.joint_names, len(assets.FEET))
        # record the whole step in one CUDA graph and replay it (CUDA, reset by mask; module docstring)
        self.cuda_graph = False
        self._step_graph: StepGraph | None = None
        self.compiled_modules = self.compile_physics_ahead(workers) if workers else 0

    def compile_physics_ahead(self, workers: int) -> int:
        """Compile the Warp modules of one physics step ``workers`` at a time, before it first runs;
        returns how many module variants were loaded.

        Warp compiles a module at the first launch of one of its kernels, one after the other: a cold
        first step compiles Newton's, MuJoCo Warp's and Isaac Lab's modules in a row. Here one
        ``sim.step`` runs with every launch recorded instead of run
        (:func:`~isaac_adapter.backends.warp_stream.launches_recorded`), and the modules it named are
        compiled side by side. That step's Python still ran: Newton consumed its pending model
        changes, swapped its state buffers, counted the step and cached contact conversions, none of
        whose kernels ran. So the attributes of the physics manager, its backend, solver, collision
        pipeline and contacts, and of the simulation context, are put back as they were
        (:func:`~isaac_adapter.backends.warp_stream.python_attributes_restored`), and the next step
        is the one it would have been (the root pose after five steps equal to the bit on the CPU,
        ``tests_isaaclab``). Newton's own CUDA graph is not captured inside the recorded step.
        """
        managers, i = [PhysicsManager], 0  # the class attributes of every physics manager (the active one is a subclass)
        while i < len(managers):
            managers += [sub for sub in managers[i].__subclasses__() if sub not in managers]
            i += 1
        owners = [*managers, self.sim, NewtonManager.backend, NewtonManager._solver,
                  getattr(NewtonManager, "_collision_pipeline", None), NewtonManager._contacts]
        with python_attributes_restored(*owners), self._newton_graph_off(), launches_recorded() as seen:
            self.sim.step(render=False)
        return compile_recorded(seen, workers)

    def _setup_scene(self) -> None:
        if self.cfg.self_collisions:  # the self-only colliders off the ground, before the model is finalized
            self._model_init_handle = NewtonManager.register_callback(
                self._filter_from_ground, PhysicsEvent.MODEL_INIT, name="g1_self_only_colliders_off_the_ground")

    def _filter_from_ground(self, _event: Any) -> None:
        sim = self.sim
        filter_from_ground(sim.get_or_create_backend(NewtonBuilderCfg(physics_cfg=sim.cfg.physics)), self.cfg.model_variant)

    # -- the simulator seam --------------------------------------------------------------------

    def _read_robot_state(self) -> PhysicsState:
        # fresh tensors (the seam's contract): Isaac Lab's data arrays are live views that resets
        # and physics steps overwrite; indexing and arithmetic below copy, the velocities are cloned.
        # Only Isaac Lab's base data (poses of the links, velocities of the centres of mass, the
        # centres' offsets): its derived properties are computed behind a host-side timestamp, which a
        # recorded step cannot hold (Isaac Lab refuses them inside a capture), so what is derived
        # from them is derived here, on the device
        d, ids, feet = self.robot.data, self._joint_index, self._foot_index
        origins = self.scene.env_origins
        link_pose = as_torch(d.body_link_pose_w)  # [N, B, 7]
        com_vel = as_torch(d.body_com_vel_w)  # [N, B, 6]: linear, angular
        com_offset_b = as_torch(d.body_com_pos_b)  # [N, B, 3]
        com_offset_w = quat_apply(quat_wxyz(link_pose[..., 3:7]), com_offset_b)  # link origin -> centre of mass, world
        # a link origin's velocity: its centre's, less the spin's share over the offset between them
        link_lin_vel = com_vel[..., :3] - torch.cross(com_vel[..., 3:], com_offset_w, dim=-1)
        mass = as_torch(d.body_mass).to(self.device)  # [N, B]
        com = ((link_pose[..., :3] + com_offset_w) * mass.unsqueeze(-1)).sum(1) / mass.sum(1, keepdim=True)
        root = self._base_id[0]  # a Python int: a tensor index would be read back to the host
        return PhysicsState(
            root_pos_w=as_torch(d.root_link_pose_w)[:, :3] - origins,
            root_quat_w=root_quat_wxyz(d),
            root_lin_vel_w=link_lin_vel[:, root],
            root_ang_vel_w=com_vel[:, root, 3:].clone(),
            joint_pos=as_torch(d.joint_pos)[:, ids],
            joint_vel=as_torch(d.joint_vel)[:, ids],
            applied_torque=as_torch(self.robot.actuators.applied_effort)[:, ids],
            foot_contact=feet_in_contact(self.feet_contact, self._contact_index),
            foot_pos_w=link_pose[:, feet, :3] - origins.unsqueeze(1),
            foot_lin_vel_w=link_lin_vel[:, feet],
            com_pos_w=com - origins,
        )

    @property
    def final_obs_every_step(self) -> bool:
        """True when every step's ``extras["final_obs"]`` is a fresh ``{group: [N, ...]}`` of every env's
        observation before the step's resets (the reset by mask), so a reader needs no ids."""
        return self.cfg.reset_by_mask

    def _write_reset_rows(self, env_ids: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        pose = torch.cat([qpos[:, :3] + self.scene.env_origins[env_ids], qpos[:, [4, 5, 6, 3]]], dim=-1)
        self.robot.write_root_pose_to_sim_index(root_pose=pose, env_ids=env_ids)
        self.robot.write_root_velocity_to_sim_index(root_velocity=qvel[:, :6].contiguous(), env_ids=env_ids)
        joints = self._joint_ids
        self.robot.write_joint_position_to_sim_index(position=qpos[:, 7:].contiguous(), joint_ids=joints, env_ids=env_ids)
        self.robot.write_joint_velocity_to_sim_index(velocity=qvel[:, 6:].contiguous(), joint_ids=joints, env_ids=env_ids)

    def _write_reset_rows_masked(self, mask: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        # Isaac Lab's mask writes take every row and keep the simulator's where the mask is off
        env_mask = warp_mask(mask)
        # (w, x, y, z) -> (x, y, z, w) by a roll: a list index is an upload, a host sync, on every call
        pose = torch.cat([qpos[:, :3] + self.scene.env_origins, qpos[:, 3:7].roll(-1, dims=-1)], dim=-1)
        self.robot.write_root_pose_to_sim_mask(root_pose=pose, env_mask=env_mask)
        self.robot.write_root_velocity_to_sim_mask(root_velocity=qvel[:, :6].contiguous(), env_mask=env_mask)
        joint_pos = as_torch(self.robot.data.joint_pos).clone()
        joint_vel = as_torch(self.robot.data.joint_vel).clone()
        joint_pos[:, self._joint_index] = qpos[:, 7:]
        joint_vel[:, self._joint_index] = qvel[:, 6:]
        self.robot.write_joint_position_to_sim_mask(position=joint_pos, env_mask=env_mask)
        self.robot.write_joint_velocity_to_sim_mask(velocity=joint_vel, env_mask=env_mask)

    def _write_physics_params(self, mask: torch.Tensor, params: dict[str, torch.Tensor]) -> None:
        # Isaac Lab's mask setters take every row and keep the simulator's where the mask is off: no
        # nonzero, no host synchronisation; the rows not randomized are written with their nominal values.
        # They keep Isaac Lab's and Newton's model the simulator's; the solver gets the values from
        # copy_into_solver, so the model changes they raise are taken back.
        pending = apply_pending_model_changes()  # set before the draw (Isaac Lab's actuator setup): on nominal values
        env_mask = warp_mask(mask)
        nominal, robot, joints = self._nominal, self.robot, self._joint_index
        if "link_mass_scale" in params:  # a link's inertia scales with its mass (its density changes), as on MuJoCo
            scale = torch.ones_like(nominal["mass"])
            scale[:, self._link_index] = params["link_mass_scale"]
            robot.set_masses_mask(masses=nominal["mass"] * scale, env_mask=env_mask)
            robot.set_inertias_mask(inertias=nominal["inertia"] * scale.unsqueeze(-1), env_mask=env_mask)
        if "base_com_offset" in params:
            com = nominal["com"].clone()
            com[:, self._base_index, :3] += params["base_com_offset"].unsqueeze(1)
            robot.set_coms_mask(coms=com, env_mask=env_mask)
        for name, key, write in (("armature_scale", "armature", robot.write_joint_armature_to_sim_mask),
                                 ("kp_scale", "stiffness", robot.write_joint_stiffness_to_sim_mask),
                                 ("kd_scale", "damping", robot.write_joint_damping_to_sim_mask)):
            if name in params:
                values = nominal[key].clone()
                values[:, joints] *= params[name]
                write(**{key: values}, env_mask=env_mask)
        if "joint_friction_scale" in params:
            values = nominal["friction"].clone()
            values[:, joints] *= params["joint_friction_scale"]
            robot.write_joint_friction_coefficient_to_sim_mask(joint_friction_coeff=values, env_mask=env_mask)
        if "friction" in params:  # absolute, as the pairs' sliding friction on MuJoCo
            cols, friction = self._foot_friction_cols, self._shape_friction
            friction[:, cols] = torch.where(mask.unsqueeze(-1), params["friction"].unsqueeze(-1), friction[:, cols])
        NewtonManager._model_changes = pending
        copy_into_solver(params)

    def _push_root_velocity(self, mask: torch.Tensor, delta: torch.Tensor) -> None:
        # the centre of mass's velocity is what the setter writes: kicked by delta with the spin kept,
        # every point of the base moves delta faster; by mask, as above
        velocity = as_torch(self.robot.data.root_com_vel_w).clone()  # [N, 6]: base data, see _read_robot_state
        velocity[:, :3] += delta
        self.robot.write_root_velocity_to_sim_mask(root_velocity=velocity.contiguous(), env_mask=warp_mask(mask))

    def _pre_physics_step(self, actions: torch.Tensor) -> None:
        self._stepping = True  # resets until the end of this step end episodes (see _reset_idx)
        G1WalkTask._pre_physics_step(self, actions)
        # MuJoCo clamps a position servo's target to its control range; the drives here do not
        self.joint_pos_target = torch.maximum(torch.minimum(self.joint_pos_target, self._target_high), self._target_low)

    def _apply_action(self) -> None:
        self.robot.actuators.target_command.set_position_index(value=self.joint_pos_target, joint_ids=self._joint_ids_wp)

    def _get_dones(self) -> tuple[torch.Tensor, torch.Tensor]:
        terminated, time_out = G1WalkTask._get_dones(self)
        self.extras["termination_cause"] = self.termination_cause.clone()
        self.extras["time_outs"] = time_out
        self.extras["log"] = self._step_log(time_out)
        return terminated, time_out

    def _reset_envs_from_buffer(self) -> torch.Tensor | None:
        if not self.cfg.reset_by_mask:
            return DirectRLEnv._reset_envs_from_buffer(self)
        # every env's observation before the reset: the ended rows are the final observations
        self.extras["final_obs"] = self._compute_observations()
        self._reset_idx(self.reset_buf)
        return None  # Isaac Lab's signal that the reset was done without ids

    def _reset_idx(self, env_ids: Any) -> None:
        ended = torch.as_tensor(env_ids, device=self.device)
        ended = ended if ended.dtype == torch.bool else ended.long().reshape(-1)
        if self._stepping:  # an episode end: snapshot it before the reset overwrites it
            self._record_episode_end(ended)
            self.extras["log"].update(self._last_episode_log())
        if ended.dtype == torch.bool:
            # what DirectRLEnv._reset_idx does with ids, by mask (this env has no events or noise models)
            env_mask = warp_mask(ended)
            self.robot.reset(env_mask=env_mask)
            self.feet_contact.reset(env_mask=env_mask)
        else:
            DirectRLEnv._reset_idx(self, ended)
        G1WalkTask._reset_idx(self, ended)  # clears episode_length_buf of the ended rows too

    def step(self, action: torch.Tensor) -> Any:
        """Isaac Lab's ``DirectRLEnv.step``; with :attr:`cuda_graph`, a replay of it (module docstring)."""
        if self.cuda_graph:
            if self._step_graph is None:
                self._step_graph = self._new_step_graph()
            if getattr(self.sim.physics_manager, "_graph_capture_pending", False):
                return self._eager_step(action)  # Newton records its own physics graph on its first step
            return self._step_graph.step(action)
        if self._step_graph is not None:
            self._step_graph.release()
            self._step_graph = None
        return self._eager_step(action)

    def _eager_step(self, action: torch.Tensor) -> Any:
        try:
            return DirectRLEnv.step(self, action)
        finally:
            self._stepping = False

    def _new_step_graph(self) -> StepGraph:
        if not self.cfg.reset_by_mask:
            raise ValueError("cuda_graph: the reset by ids waits on the GPU for the ended ids at every step and "
                             "cannot be recorded; build the env with reset_by_mask=True (the default)")
        return StepGraph(self, self._eager_step, self._newton_on_torch_stream, self._after_replay, counts_inside=True)

    @contextmanager
    def _newton_graph_off(self, off: bool = True) -> Iterator[None]:
        """With ``off``, Newton runs its decimation loop eagerly instead of capturing or launching its
        own Warp graph, until the block ends (where its config asked for one)."""
        cfg = getattr(self.sim.physics_manager, "_cfg", None)
        own_graph = off and bool(getattr(cfg, "use_cuda_graph", False))
        if own_graph:
            cfg.use_cuda_graph = False
        try:
            yield
        finally:
            if own_graph:
                cfg.use_cuda_graph = True

    @contextmanager
    def _newton_on_torch_stream(self) -> Iterator[None]:
        # while torch records, Newton's decimation loop runs eagerly on torch's stream (its own Warp
        # graph cannot be launched inside the capture); outside a capture only the stream changes
        recording = torch.cuda.is_current_stream_capturing()
        # the recording runs the step's Python but no step: the host clocks it advances are put back
        clocks = (self._sim_step_counter, PhysicsManager._sim_time)
        try:
            with self._newton_graph_off(recording), warp_on_torch_stream(self.device):
                yield
        finally:
            if recording:
                self._sim_step_counter, PhysicsManager._sim_time = clocks

    def _after_replay(self) -> None:
        # the host counts DirectRLEnv.step and Newton advance in Python, which a replay skips
        self.common_step_counter += 1
        self._sim_step_counter += self.cfg.decimation
        PhysicsManager._sim_time += self.step_dt


def make_g1_direct_env(task: G1WalkConfig, device: str | None = None, clip_actions: float | None = None,
                       reset_by_mask: bool = True) -> Any:
    """Build :class:`G1WalkDirectEnv` for ``task`` and adapt it for ``Runner`` (``IsaacLabVecEnv``)."""
    from isaac_adapter.adapters.isaaclab import IsaacLabVecEnv

    env = G1WalkDirectEnv(G1WalkDirectEnvCfg.from_task(task, device, reset_by_mask), task)
    return IsaacLabVecEnv(env, clip_actions=clip_actions)
