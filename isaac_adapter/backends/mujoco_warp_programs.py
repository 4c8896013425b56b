"""MuJoCo Warp's model, data and device programs, without torch: what
:class:`~isaac_adapter.backends.mujoco_warp.MujocoWarpBackend` runs and what its compile workers
(:mod:`~isaac_adapter.backends.compile_worker`) record, so that a worker starts without torch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mujoco
import mujoco_warp as mjw
import warp as wp

from isaac_adapter.backends.warp_stream import launches_recorded, unique_variants

#: The backend's Warp programs, each a CUDA graph on a GPU: a policy step's substeps, the staging of
#: quantities the task reads, and the reset of the ended worlds.
PROGRAMS = ("stage", "step", "reset")


def device_model(model: mujoco.MjModel, num_envs: int, device: Any, batched: Sequence[str], *, nconmax: int,
                 njmax: int, print_overflow: bool = False, convex_box_box: bool = False) -> tuple[Any, Any]:
    """MuJoCo Warp's ``(Model, Data)`` of ``num_envs`` worlds of ``model`` on the Warp ``device``, the
    model fields ``batched`` with one row per world, ``put_data`` from a CPU ``mj_forward`` of qpos0."""
    mjd = mujoco.MjData(model)
    mujoco.mj_forward(model, mjd)
    with wp.ScopedDevice(device):
        m = mjw.put_model(model, batch_sizes={name: num_envs for name in batched})
        if not print_overflow:
            m.opt.warn_overflow = 0
        if not convex_box_box:
            # MuJoCo Warp reads this MuJoCo flag as "box-box by the primitive", the CPU's
            # algorithm (a converged step then matches the CPU's, tests/test_warp_parity.py).
            # The G1's only convex pair is its feet, so no GJK/EPA kernel is built: the one
            # that took 41-45 s to compile on a cold H200. The CPU model is not touched.
            m.opt.disableflags |= int(mjw.DisableBit.NATIVECCD)
        d = mjw.put_data(model, mjd, nworld=num_envs, nconmax=nconmax, njmax=njmax)
    return m, d


def run_program(name: str, m: Any, d: Any, reset_mask: Any, decimation: int, sensors_every_substep: bool) -> None:
    """Launch one of :data:`PROGRAMS` on ``(m, d)``: ``"step"`` (``decimation`` substeps), ``"stage"``
    (``step1``: the quantities the task reads) or ``"reset"`` (the worlds of ``reset_mask``)."""
    if name == "step":
        for i in range(decimation):
            mjw.step2(m, d)
            if sensors_every_substep or i == decimation - 1:
                mjw.step1(m, d)
            else:  # MuJoCo Warp reads the flag in Python, so a captured graph holds no sensor kernels here
                sensors_on = m.opt.disableflags
                m.opt.disableflags = sensors_on | int(mjw.DisableBit.SENSOR)
                try:
                    mjw.step1(m, d)
                finally:
                    m.opt.disableflags = sensors_on
    elif name == "stage":
        mjw.step1(m, d)
    elif name == "reset":
        mjw.reset_data(m, d, reset=reset_mask)
    else:
        raise KeyError(name)


def program_variants(m: Any, d: Any, reset_mask: Any, device: Any, decimation: int,
                     sensors_every_substep: bool) -> list[tuple[Any, Any, int | None]]:
    """The Warp module variants ``(module, device, block_dim)`` that :data:`PROGRAMS` launch, each
    once, in a stable order (:func:`~isaac_adapter.backends.warp_stream.unique_variants`), found by
    running each program with every launch recorded instead of run
    (:func:`~isaac_adapter.backends.warp_stream.launches_recorded`): no memory that existed before is written."""
    with wp.ScopedDevice(device), launches_recorded() as seen:
        for name in PROGRAMS:
            run_program(name, m, d, reset_mask, decimation, sensors_every_substep)
    return unique_variants(seen)
