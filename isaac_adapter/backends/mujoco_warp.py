"""MuJoCo Warp (``mujoco_warp``): every env is one world of a batched ``mjw.Data``, on a GPU or the CPU.

The same engine Isaac Lab 3 and mjlab run. State and outputs stay in Warp arrays; this backend
reads and writes them through zero-copy torch views (``wp.to_torch``), so nothing crosses the
host/device boundary during a step or a reset.

How it mirrors :mod:`isaac_adapter.backends.mujoco_cpu` (same conventions, same answers):

* **Stages.** A policy step runs ``decimation`` times ``step2`` (actuation, constraint solve,
  integration) followed by ``step1`` (kinematics, collisions, position and velocity sensors at the
  new state). ``step1`` + ``step2`` is exactly ``mj_step``, and ending each substep on ``step1``
  leaves positions, velocities and sensors (foot contacts, foot velocities) describing the state
  the policy acts on, as ``mujoco.batch``'s ``stage=mjSTAGE_VEL`` does, at no extra cost.
  ``actuator_force`` is only written by ``step2``: after a step it holds the torques applied in
  the last substep.
* **CUDA graphs.** On CUDA the substeps are captured once into a graph and replayed with one
  launch; the reset and the stage recomputation too. On the CPU device the same calls run plainly.
  Warp's streams are blocking, so graph launches are ordered with torch work on torch's default
  stream (as in mjlab); run torch on the default stream.
* **Selective reset without host synchronisation.** ``mjw.reset_data`` with a per-world mask (the
  analogue of ``mj_resetData``: time, controls, activations, warm start...), then the new
  ``qpos``/``qvel``/``ctrl`` rows are written with torch index ops on the views, then ``step1``
  recomputes the derived fields. ``step1`` runs on every world; the state of untouched worlds is
  never written, and the derived outputs this backend reports are restored for them, so every
  field of :meth:`state` of an untouched env is bit-identical.
* **Buffers and health.** Contact (``nconmax``) and constraint (``njmax``) buffers default to an
  upper bound computed from the model's collision pairs (:func:`contact_capacity`), so they cannot
  overflow. MuJoCo Warp ORs overflow/warning bits into ``d.overflow`` per world; every policy step
  folds them, non-finite ``qpos``/``qvel`` and buffer peaks into device accumulators (no sync);
  :meth:`check_health` reads them (one sync), raises :class:`SimulationHealthError` naming the env
  ids, and is called every ``check_every`` policy steps.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import mujoco
import mujoco_warp as mjw
import numpy as np
import torch
import warp as wp

from isaac_adapter.backends.base import PhysicsState
from isaac_adapter.backends.layout import ModelParams, RobotArrays, init_backend
from isaac_adapter.backends.compile_worker import start_compile_processes
from isaac_adapter.backends.mujoco_warp_programs import (  # PROGRAMS: also importable from here, as before
    PROGRAMS,
    device_model,
    program_variants,
    run_program,
)
from isaac_adapter.backends.warp_stream import compile_recorded, variant_names, warp_on_torch_stream
from isaac_adapter.math import put_rows

#: Bits of ``d.overflow`` that mean results were dropped or are wrong: buffers too small (contacts,
#: constraint rows, non-zeros, CCD, EPA). Solver and line-search iteration caps are not among them:
#: reaching ``opt.iterations`` is how a fixed-budget solver ends (MuJoCo on CPU stops there too).
FATAL_OVERFLOW = int(mjw.OverflowType.ALL) & ~int(mjw.OverflowType.ITERATIONS | mjw.OverflowType.LS_ITERATIONS)

# Contacts one collision function can return per geom pair (MuJoCo Warp's primitive colliders);
# any other pair of types goes through the general convex path, bounded by mjMAXCONPAIR.
_G = mujoco.mjtGeom
_MAX_CONTACTS = {
    (_G.mjGEOM_PLANE, _G.mjGEOM_SPHERE): 1,
    (_G.mjGEOM_PLANE, _G.mjGEOM_CAPSULE): 2,
    (_G.mjGEOM_PLANE, _G.mjGEOM_ELLIPSOID): 1,
    (_G.mjGEOM_PLANE, _G.mjGEOM_CYLINDER): 4,
    (_G.mjGEOM_PLANE, _G.mjGEOM_BOX): 8,
    (_G.mjGEOM_SPHERE, _G.mjGEOM_SPHERE): 1,
    (_G.mjGEOM_SPHERE, _G.mjGEOM_CAPSULE): 1,
    (_G.mjGEOM_SPHERE, _G.mjGEOM_CYLINDER): 1,
    (_G.mjGEOM_SPHERE, _G.mjGEOM_BOX): 1,
    (_G.mjGEOM_CAPSULE, _G.mjGEOM_CAPSULE): 2,
    (_G.mjGEOM_CAPSULE, _G.mjGEOM_BOX): 2,
    (_G.mjGEOM_BOX, _G.mjGEOM_BOX): 8,
}


class SimulationHealthError(RuntimeError):
    """A buffer overflowed or the state became non-finite; ``env_ids`` lists the worlds concerned."""

    def __init__(self, message: str, env_ids: list[int]) -> None:
        super().__init__(message)
        self.env_ids = env_ids


def overflow_names(bits: int) -> list[str]:
    """Names of the :class:`mujoco_warp.OverflowType` bits set in ``bits``."""
    return [flag.name for flag in mjw.OverflowType if flag.value and flag.value & (flag.value - 1) == 0 and bits & flag.value]


def _rows_per_contact(model: mujoco.MjModel, condim: int) -> int:
    if condim == 1:
        return 1
    if model.opt.cone == mujoco.mjtCone.mjCONE_PYRAMIDAL:
        return 2 * (condim - 1)
    return condim


def contact_capacity(model: mujoco.MjModel) -> tuple[int, int]:
    """Upper bounds ``(contacts, constraint rows)`` one world of ``model`` can ever need.

    Contacts: every explicit ``<pair>`` plus every geom pair that ``contype``/``conaffinity`` can
    make collide (bodies differ, not both static; parent filtering ignored, so an over-count), each
    at the most contacts its collider returns. Rows: those contacts at their condim (pyramidal
    cones: ``2 (condim - 1)`` rows), plus every joint limit, friction-loss dof, tendon limit and
    equality row, all assumed active at once.
    """
    dim_by_pair: list[tuple[int, int, int]] = [
        (int(model.pair_geom1[i]), int(model.pair_geom2[i]), int(model.pair_dim[i])) for i in range(model.npair)
    ]
    explicit = {(min(a, b), max(a, b)) for a, b, _ in dim_by_pair}
    excluded = {
        tuple(sorted((int(model.exclude_signature[i]) >> 16, int(model.exclude_signature[i]) & 0xFFFF)))
        for i in range(model.nexclude)
    }
    static = model.body_weldid == 0
    contype, conaff = model.geom_contype, model.geom_conaffinity
    for g1 in range(model.ngeom):
        for g2 in range(g1 + 1, model.ngeom):
            b1, b2 = int(model.geom_bodyid[g1]), int(model.geom_bodyid[g2])
            if b1 == b2 or (static[b1] and static[b2]) or (g1, g2) in explicit:
                continue
            if not ((contype[g1] & conaff[g2]) or (contype[g2] & conaff[g1])):
                continue
            if tuple(sorted((b1, b2))) in excluded:
                continue
            dim_by_pair.append((g1, g2, int(max(model.geom_condim[g1], model.geom_condim[g2]))))
    contacts = rows = 0
    for g1, g2, condim in dim_by_pair:
        t1, t2 = sorted((int(model.geom_type[g1]), int(model.geom_type[g2])))
        n = _MAX_CONTACTS.get((_G(t1), _G(t2)), int(mujoco.mjMAXCONPAIR))
        contacts += n
        rows += n * _rows_per_contact(model, condim)
    rows += int(model.jnt_limited.sum()) + int((model.dof_frictionloss > 0).sum())
    if model.ntendon:
        rows += int(model.tendon_limited.sum()) + int((model.tendon_frictionloss > 0).sum())
    eq_rows = {
        mujoco.mjtEq.mjEQ_CONNECT: 3,
        mujoco.mjtEq.mjEQ_WELD: 6,
        mujoco.mjtEq.mjEQ_JOINT: 1,
        mujoco.mjtEq.mjEQ_TENDON: 1,
    }
    rows += sum(eq_rows.get(mujoco.mjtEq(int(t)), 6) for t in model.eq_type)
    return max(contacts, 1), max(rows, 1)


@contextmanager
def _no_gc():
    """Keep the garbage collector out of a graph capture: a finalised Warp object would be recorded."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class MujocoWarpBackend:
    """``num_envs`` copies of ``model`` as the worlds of one MuJoCo Warp ``Data`` on ``device``.

    Args:
        model: compiled model; every actuator drives one hinge/slide joint, the root has a free joint.
        num_envs: number of simulations (worlds).
        decimation: physics substeps per ``step`` call.
        root_body: name of the floating-base body.
        foot_bodies: names of the foot bodies, ``F`` of them.
        foot_contact_sensors: one contact sensor per foot (any positive reading means contact).
        foot_vel_sensors: one ``framelinvel`` sensor per foot body.
        device: ``"cuda:0"``, ``"cpu"``, ... (a torch/Warp device name).
        nconmax: contacts allocated per world (pooled over worlds); default: :func:`contact_capacity`.
        njmax: constraint rows allocated per world (a hard per-world limit); default: :func:`contact_capacity`.
        use_cuda_graph: capture the substeps in CUDA graphs; default: on CUDA with Warp's memory pool.
        check_every: call :meth:`check_health` every this many policy steps (0: only when asked).
        fatal_overflow: ``d.overflow`` bits that make :meth:`check_health` raise.
        print_overflow: let MuJoCo Warp's kernels print their own overflow warnings.
        sensors_every_substep: compute the sensors on every substep; by default only on the last
            one of a ``step`` (and after a reset), the only readings :meth:`state` reports: sensors
            never act on the dynamics, so the states are the same either way.
        randomized: the randomized parameters (``tasks.g1_walk.randomization.PHYSICS_PARAMS``) whose
            model fields get one row per world (MuJoCo Warp's batched model arrays), so that
            :meth:`set_physics_params` can give each env its own; none by default (one shared model).
        convex_box_box: collide box pairs (the G1's two feet) with MuJoCo Warp's general convex
            path (GJK/EPA) instead of its box-box primitive, the algorithm MuJoCo uses on the CPU.
            Off by default: that path's kernel is the slowest of a cold start to compile.
        compile_workers: before anything runs, find the Warp modules of the step, staging and reset
            programs (:func:`~isaac_adapter.backends.warp_stream.launches_recorded`) and compile them
            this many at a time; 0 (default) leaves each to compile at its first launch, in turn.
        compile_processes: with ``compile_workers`` N > 1, compile in N - 1 worker processes and this
            one, each taking the next module no other has claimed, instead of N threads. Warp
            generates each module's code under one lock per process, so threads compile side by side
            only after it; the workers write Warp's kernel cache and this process then reads their
            modules from it. A module a worker claimed and did not report (:attr:`compile_misses`:
            it failed or was stopped) is compiled here (:mod:`~isaac_adapter.backends.compile_worker`).
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        num_envs: int,
        decimation: int,
        *,
        root_body: str,
        foot_bodies: Sequence[str],
        foot_contact_sensors: Sequence[str],
        foot_vel_sensors: Sequence[str],
        device: str | torch.device = "cuda:0",
        nconmax: int | None = None,
        njmax: int | None = None,
        use_cuda_graph: bool | None = None,
        check_every: int = 50,
        fatal_overflow: int = FATAL_OVERFLOW,
        print_overflow: bool = False,
        sensors_every_substep: bool = False,
        convex_box_box: bool = False,
        randomized: Sequence[str] = (),
        compile_workers: int = 0,
        compile_processes: bool = False,
    ) -> None:
        layout = init_backend(self, model, num_envs, decimation, torch.device(device),
                              root_body=root_body, foot_bodies=foot_bodies,
                              foot_contact_sensors=foot_contact_sensors, foot_vel_sensors=foot_vel_sensors)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        self._wp_device = wp.get_device(str(self.device))
        self.check_every = check_every
        self.fatal_overflow = int(fatal_overflow)
        self.sensors_every_substep = bool(sensors_every_substep)

        # -- model and data on the device --------------------------------------------------------
        max_contacts, max_rows = self.capacity = contact_capacity(model)
        self.nconmax = int(nconmax) if nconmax is not None else max_contacts
        self.njmax = int(njmax) if njmax is not None else max_rows
        self._params = ModelParams(model, layout).to(self.device)
        self.num_links = self._params.num_links
        batched = self._params.fields(tuple(randomized))
        worker_processes = None
        if compile_processes and compile_workers > 1:
            # started first, so that their imports and builds overlap this one
            worker_processes = start_compile_processes(
                model, decimation, str(self.device), batched, shares=compile_workers,
                nconmax=self.nconmax, njmax=self.njmax, print_overflow=print_overflow,
                convex_box_box=convex_box_box, sensors_every_substep=self.sensors_every_substep)
        self._m, self._d = device_model(model, num_envs, self._wp_device, batched, nconmax=self.nconmax,
                                        njmax=self.njmax, print_overflow=print_overflow, convex_box_box=convex_box_box)
        with wp.ScopedDevice(self._wp_device):
            self._reset_mask_wp = wp.zeros(num_envs, dtype=bool)
        d = self._d

        # zero-copy torch views of the Warp arrays: [N, ...], float32
        view = wp.to_torch
        self._qpos, self._qvel, self._ctrl = view(d.qpos), view(d.qvel), view(d.ctrl)
        self._actuator_force = view(d.actuator_force)
        self._sensordata = view(d.sensordata)
        self._xpos = view(d.xpos)  # [N, nbody, 3]
        self._subtree_com = view(d.subtree_com)  # [N, nbody, 3]
        self._overflow = view(d.overflow)  # [N] int32 bitmask, sticky until reset_data
        self._nefc = view(d.nefc)  # [N]
        self._nacon = view(d.nacon)  # [1], all worlds
        self._reset_mask = view(self._reset_mask_wp)  # [N] bool
        # per-world model fields, [N, ...] views (vector types as a last dim)
        self._model_rows = {name: view(getattr(self._m, name)) for name in batched}
        # read-out and reset rows as in the CPU backend; actuator_force is only written by step2,
        # so it holds the torques of the last substep
        self._robot = RobotArrays(
            layout,
            qpos=self._qpos,
            qvel=self._qvel,
            ctrl=self._ctrl,
            sensordata=self._sensordata,
            xpos=self._xpos,
            subtree_com=self._subtree_com,
            torque=self._actuator_force,
        )
        self._integration = {  # everything a step reads that is not recomputed from qpos/qvel
            name: view(getattr(d, name))
            for name in ("time", "qpos", "qvel", "act", "ctrl", "qacc_warmstart", "qfrc_applied", "xfrc_applied",
                         "mocap_pos", "mocap_quat", "eq_active")
        }  # fmt: skip

        # health accumulators, on the device, read by check_health
        dev = self.device
        self._flags = torch.zeros(num_envs, dtype=torch.int32, device=dev)
        self._iter_cap_steps = torch.zeros(num_envs, dtype=torch.int32, device=dev)
        self._nonfinite = torch.zeros(num_envs, dtype=torch.bool, device=dev)
        self._peak_nefc = torch.zeros(num_envs, dtype=torch.int32, device=dev)
        self._peak_nacon = torch.zeros(1, dtype=torch.int32, device=dev)
        # the policy step (counted on the device) at which each world first overflowed since the last check
        self._step_on_device = torch.zeros((), dtype=torch.long, device=dev)
        self._first_overflow_step = torch.full((num_envs,), -1, dtype=torch.long, device=dev)
        self._steps_since_check = 0
        self._steps = 0
        self._totals = {"steps": 0, "iteration_cap_steps": 0, "peak_nefc": 0, "peak_nacon": 0}
        self._on_torch_stream = False  # see on_torch_stream

        # -- graphs --------------------------------------------------------------------------------
        if use_cuda_graph is None:
            use_cuda_graph = self._wp_device.is_cuda and wp.is_mempool_enabled(self._wp_device)
        self.use_cuda_graph = bool(use_cuda_graph) and self._wp_device.is_cuda
        self._graphs: dict[str, Any] = {}
        self.compiled_modules = 0  # module variants compiled ahead (compile_workers)
        self.compiled_in_workers = 0  # of those, compiled by worker processes (compile_processes)
        self.compile_misses: list[str] = []  # claimed by a worker process that did not report them
        if compile_workers > 0:
            variants = self.recorded_launches()
            if worker_processes is not None:
                # this process claims its part beside the workers; then everything loads, theirs from the cache
                compiled = set(worker_processes.compile_claimed(variants))
                from_workers = worker_processes.wait()
                names = variant_names(variants)
                self.compiled_in_workers = sum(name in from_workers for name in names)
                compiled |= from_workers
                self.compile_misses = [name for name in names if name not in compiled]
            self.compiled_modules = compile_recorded(variants, compile_workers)
        # put_data copied a CPU forward() of qpos0; make every world's stages our own
        self._run("stage")
        if self.use_cuda_graph:
            with _no_gc(), wp.ScopedDevice(self._wp_device):
                # the step first, as every measured run captured them: in PROGRAMS' order the replay
                # test of tests/test_warp_in_torch_graph.py failed 2 of 9 runs on one H100, this order 0 of 5
                for name in ("step", "stage", "reset"):
                    with wp.ScopedCapture() as capture:
                        self._ops(name)
                    self._graphs[name] = capture.graph
            self._run("stage")

    # -- the three device programs -------------------------------------------------------------

    def recorded_launches(self) -> list[tuple[Any, Any, int | None]]:
        """The Warp module variants of the step, staging and reset programs
        (:func:`~isaac_adapter.backends.mujoco_warp_programs.program_variants`)."""
        return program_variants(self._m, self._d, self._reset_mask_wp, self._wp_device, self.decimation,
                                self.sensors_every_substep)

    def _ops(self, name: str) -> None:
        run_program(name, self._m, self._d, self._reset_mask_wp, self.decimation, self.sensors_every_substep)

    def _run(self, name: str) -> None:
        with wp.ScopedDevice(self._wp_device):
            graph = None if self._on_torch_stream else self._graphs.get(name)
            if graph is not None:
                wp.capture_launch(graph)
            else:
                self._ops(name)

    # -- state ---------------------------------------------------------------------------------

    def state(self) -> PhysicsState:
        """Copies of the current state as float32 tensors on ``device`` (shapes in :class:`PhysicsState`)."""
        return self._robot.state()

    # -- stepping ------------------------------------------------------------------------------

    def step(self, joint_pos_targets: torch.Tensor) -> None:
        """Hold position targets ``[N, J]`` for ``decimation`` substeps (one graph launch on CUDA)."""
        self._ctrl.copy_(joint_pos_targets.detach())
        self._run("step")
        self._accumulate_health()
        if not self._on_torch_stream:  # else the caller does it once per replay of its graph
            self.after_step()

    def after_step(self) -> None:
        """The host side of a step: the step counts and, every ``check_every`` steps, the health
        check (a host read). :meth:`step` calls it, except under :meth:`on_torch_stream`."""
        self._steps += 1
        self._steps_since_check += 1
        if self.check_every > 0 and self._steps_since_check >= self.check_every:
            self.check_health()

    @contextmanager
    def on_torch_stream(self) -> Iterator[None]:
        """Run the backend's Warp work eagerly (not from its own Warp graphs) on torch's current
        stream (:func:`warp_on_torch_stream`), so that a step or a reset is recorded into the
        caller's torch CUDA graph; :meth:`step` leaves :meth:`after_step` to the caller. A recorded
        Warp graph cannot be launched while torch captures."""
        self._on_torch_stream = True
        try:
            with wp.ScopedDevice(self._wp_device), warp_on_torch_stream(self.device):
                yield
        finally:
            self._on_torch_stream = False

    def reset_envs(self, env_ids: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """Reset rows ``env_ids`` to ``qpos`` ``[K, 7+J]`` / ``qvel`` ``[K, 6+J]`` (world-frame root velocities).

        Device-side only: no host synchronisation. Every other env is left bit-identical.
        """
        if env_ids.numel() == 0:
            return
        ids = env_ids.to(self.device, torch.long)
        self._reset_mask.zero_()
        self._reset_mask.index_fill_(0, ids, True)  # not mask[ids] = True: a Python value through an index syncs
        self._reset_rows(lambda: self._robot.write_reset_rows(ids, qpos, qvel))

    def reset_envs_masked(self, mask: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """Reset the rows where ``mask`` ``[N]`` is true to those rows of ``qpos`` ``[N, 7+J]`` / ``qvel``
        ``[N, 6+J]``. Fixed shapes whatever ends, no host synchronisation; every other env is left
        bit-identical (Warp's reset and the derived fields run over every world, masked)."""
        self._reset_mask.copy_(mask)
        self._reset_rows(lambda: self._robot.write_reset_rows_masked(self._reset_mask, qpos, qvel))

    def add_root_velocity(self, mask: torch.Tensor, delta: torch.Tensor) -> None:
        """A push: add ``delta`` ``[N, 3]`` (m/s, world frame) to the root linear velocity of the worlds
        where ``mask`` ``[N]``; their derived fields are recomputed, every other world is left
        bit-identical. Device-side only: no host synchronisation."""
        self._reset_mask.copy_(mask)
        self._reset_rows(lambda: self._robot.add_root_velocity_masked(self._reset_mask, delta), reset=False)

    def set_physics_params(self, mask: torch.Tensor, params: dict[str, torch.Tensor]) -> None:
        """Give the worlds where ``mask`` ``[N]`` the model parameters ``params`` (``{name: [N, ...]}``,
        see :class:`~isaac_adapter.backends.layout.ModelParams`); the other worlds keep theirs. Each
        parameter must be one this backend was built ``randomized`` for. No host synchronisation."""
        if not params:
            return
        mask = mask.to(self.device, torch.bool)
        for name, values in self._params.values({k: v.to(self.device) for k, v in params.items()}).items():
            if name not in self._model_rows:
                raise ValueError(f"model field {name} is shared by every world; build the backend with "
                                 f"randomized={tuple(params)}")
            rows = self._model_rows[name]
            put_rows(rows, mask, values.to(rows.dtype).view(rows.shape))

    def physics_params(self, name: str) -> np.ndarray:
        """The ``[N, ...]`` per-world values of model field ``name`` (the shared ones repeated)."""
        rows = self._model_rows.get(name)
        if rows is None:
            return np.broadcast_to(getattr(self.model, name), (self.num_envs, *getattr(self.model, name).shape))
        return rows.cpu().numpy().astype(np.float64)

    def _reset_rows(self, write: Callable[[], None], reset: bool = True) -> None:
        """The reset of the worlds in :attr:`_reset_mask`, with ``write()`` putting their new state rows
        in; without ``reset`` only ``write()`` and the recomputation of the derived fields (a push)."""
        mask = self._reset_mask
        # keep what reset_data is about to clear: overflow bits of the reset worlds
        self._flags |= self._overflow
        saved = (self._sensordata.clone(), self._xpos.clone(), self._subtree_com.clone())

        # mj_resetData on those worlds: time, controls, activations, warm start, applied forces...
        if reset:
            self._run("reset")
        write()
        if reset:
            self._nonfinite &= ~mask

        # positions, velocities, sensors of the new states (step1 runs on every world; the
        # outputs reported by state() are put back where the state did not change)
        self._run("stage")
        for current, before in zip((self._sensordata, self._xpos, self._subtree_com), saved):
            put_rows(current, ~mask, before)

    # -- health --------------------------------------------------------------------------------

    def _accumulate_health(self) -> None:
        """Fold this step's overflow bits and non-finite rows into device accumulators (no sync)."""
        bits = self._overflow.clone()
        self._overflow.zero_()
        self._flags |= bits
        self._step_on_device += 1
        first = (self._first_overflow_step < 0) & ((bits & self.fatal_overflow) != 0)
        torch.where(first, self._step_on_device, self._first_overflow_step, out=self._first_overflow_step)
        self._iter_cap_steps += (bits & int(mjw.OverflowType.ITERATIONS)) != 0
        finite = torch.isfinite(self._qpos).all(-1) & torch.isfinite(self._qvel).all(-1)
        self._nonfinite |= ~finite
        torch.maximum(self._peak_nefc, self._nefc, out=self._peak_nefc)
        torch.maximum(self._peak_nacon, self._nacon, out=self._peak_nacon)

    def check_health(self) -> dict[str, float]:
        """Read the accumulated flags (one host sync); raise on overflow or non-finite state.

        Returns statistics since the last check: ``iteration_cap_frac`` (share of env-steps whose
        solver stopped at ``opt.iterations`` in some substep), ``peak_nefc`` / ``njmax`` and
        ``peak_nacon`` / ``naconmax`` (buffer headroom), ``steps``.

        Raises:
            SimulationHealthError: a fatal overflow bit or a non-finite ``qpos``/``qvel``; the
                message names the flags and the env ids (pooled contact overflows concern all).
        """
        flags = (self._flags | self._overflow).cpu()
        nonfinite = self._nonfinite.cpu()
        fatal = (flags & self.fatal_overflow) != 0
        steps = max(self._steps_since_check, 1)
        stats = {
            "steps": float(self._steps_since_check),
            "iteration_cap_frac": float(self._iter_cap_steps.sum().item()) / (steps * self.num_envs),
            "peak_nefc": float(self._peak_nefc.max().item()),
            "njmax": float(self.njmax),
            "peak_nacon": float(self._peak_nacon.item()),
            "naconmax": float(self._d.naconmax),
        }
        problems = []
        env_ids: list[int] = []
        if fatal.any():
            ids = torch.nonzero(fatal).flatten().tolist()
            bits = int(np.bitwise_or.reduce(flags[fatal].numpy()))
            first = self._first_overflow_step.cpu()[fatal]
            step = int(first[first >= 0].min()) if (first >= 0).any() else self._steps + 1
            problems.append(
                f"MuJoCo Warp overflow {overflow_names(bits & self.fatal_overflow)} in {len(ids)} envs, first at "
                f"policy step {step}: {self._needed(bits)}"
            )
            env_ids += ids
        if nonfinite.any():
            ids = torch.nonzero(nonfinite).flatten().tolist()
            problems.append(f"non-finite qpos/qvel in {len(ids)} envs")
            env_ids += ids
        if problems:
            env_ids = sorted(set(env_ids))
            shown = env_ids[:20] + (["..."] if len(env_ids) > 20 else [])
            raise SimulationHealthError("; ".join(problems) + f"; env ids {shown}", env_ids)
        totals = self._totals
        totals["steps"] += self._steps_since_check
        totals["iteration_cap_steps"] += round(stats["iteration_cap_frac"] * steps * self.num_envs)
        totals["peak_nefc"] = max(totals["peak_nefc"], int(stats["peak_nefc"]))
        totals["peak_nacon"] = max(totals["peak_nacon"], int(stats["peak_nacon"]))
        self._flags.zero_()
        self._iter_cap_steps.zero_()
        self._peak_nefc.zero_()
        self._peak_nacon.zero_()
        self._first_overflow_step.fill_(-1)
        self._steps_since_check = 0
        return stats

    def _needed(self, bits: int) -> str:
        """What to raise, and to how much, for the overflow ``bits``. MuJoCo Warp counts rows and
        contacts past the buffers (``d.nefc``, ``d.nacon``) only until its kernels stop adding them, so
        the count is a lower bound; the model's upper bound (:func:`contact_capacity`, the default)
        cannot overflow."""
        contacts, rows = self.capacity
        parts = []
        if bits & int(mjw.OverflowType.NEFC):
            seen = int(self._peak_nefc.max().item())
            parts.append(f"a world needed more than njmax={self.njmax} constraint rows (at least {seen}); raise "
                         f"njmax (env.warp_njmax) to the model's bound {rows}, its default")
        if bits & int(mjw.OverflowType.NARROWPHASE | mjw.OverflowType.BROADPHASE):
            seen = int(self._peak_nacon.item())
            parts.append(f"the worlds needed more than naconmax={self._d.naconmax} contacts (at least {seen}); raise "
                         f"nconmax (env.warp_nconmax, per world) to the model's bound {contacts}, its default")
        return "; ".join(parts) or f"raise nconmax={self.nconmax} / njmax={self.njmax} (env.warp_nconmax / env.warp_njmax)"

    def health_summary(self, reset: bool = False) -> dict[str, float]:
        """The statistics of :meth:`check_health` over every check since construction (or the last reset)."""
        t = self._totals
        out = {
            "steps": float(t["steps"]),
            "iteration_cap_frac": t["iteration_cap_steps"] / max(t["steps"] * self.num_envs, 1),
            "peak_nefc": float(t["peak_nefc"]),
            "njmax": float(self.njmax),
            "peak_nacon": float(t["peak_nacon"]),
            "naconmax": float(self._d.naconmax),
        }
        if reset:
            self._totals = dict.fromkeys(t, 0)
        return out

    # -- checkpointing -------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        state = {name: t.clone() for name, t in self._integration.items()}
        state["actuator_force"] = self._actuator_force.clone()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for name, t in self._integration.items():
            t.copy_(state[name])
        self._actuator_force.copy_(state["actuator_force"])
        # derived fields are a pure function of the state: recompute them
        self._run("stage")
