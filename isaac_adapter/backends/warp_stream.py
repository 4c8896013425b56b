"""Warp work recorded into a torch CUDA graph: shared by the MuJoCo Warp backend and Isaac Lab's
Newton step (:mod:`isaac_adapter.tasks.g1_walk.graph_step` records either); and the compile setting
both start with (:func:`forward_only_kernels`, :func:`machine_code_kernels`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
import warp as wp


@contextmanager
def warp_on_torch_stream(device: torch.device | str) -> Iterator[None]:
    """Warp's launches go to torch's current stream on ``device`` (the capturing one inside
    ``torch.cuda.graph``), and while torch captures there, Warp knows that the capture was begun
    outside it, so that MuJoCo Warp's solver loop joins it as a conditional node.

    The stream is entered without a synchronisation: a synchronising switch would record a
    dependency on uncaptured work and break the capture.
    """
    stream = wp.stream_from_torch(torch.cuda.current_stream(device))
    capturing = torch.cuda.is_current_stream_capturing()
    with wp.ScopedStream(stream, sync_enter=False):
        if capturing:
            wp.capture_begin(stream=stream, external=True)
        try:
            yield
        finally:
            if capturing:
                wp.capture_end(stream=stream)


def forward_only_kernels() -> None:
    """Compile Warp kernels without their adjoints from here on, process-wide.

    PPO never differentiates through the physics, and the adjoint code is a large part of what a
    cold start compiles: Newton's kernels behind Isaac Lab's G1 build in about half the time
    (``benchmarks/warp_compile.py --sim isaaclab --adjoints on off``). Isaac Lab's ``train.py`` and
    mjlab set the same. A module built before keeps its adjoints (Warp hashes the setting into the
    module), so call this before the first kernel launch.
    """
    wp.config.enable_backward = False


def machine_code_kernels() -> None:
    """Have Warp compile CUDA kernels to machine code for the device (CUBIN), from here on, process-wide.

    When the driver is newer than Warp's CUDA toolkit, Warp's own choice is PTX, which the driver
    compiles again into machine code when it loads each module, and keeps in a cache of its own
    (``~/.nv/ComputeCache``). A second process on the same machine finds that cache warm; a fresh
    machine (or container) pays the whole second compilation in its env build and first step
    (``benchmarks/warp_compile.py --device cuda:0 --cuda-output ptx cubin``, each row with an empty
    driver cache). A device that Warp's compiler cannot target keeps PTX (Warp's fallback). Like
    :func:`forward_only_kernels`, call it before the first kernel is loaded.
    """
    wp.config.cuda_output = "cubin"
