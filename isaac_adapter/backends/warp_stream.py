"""Warp work recorded into a torch CUDA graph: shared by the MuJoCo Warp backend and Isaac Lab's
Newton step (:mod:`isaac_adapter.tasks.g1_walk.graph_step` records either); the compile settings
both start with (:func:`forward_only_kernels`, :func:`machine_code_kernels`); and the kernels of a
program compiled side by side before it first runs (:func:`launches_recorded`, :func:`compile_recorded`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

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


@contextmanager
def launches_recorded() -> Iterator[list[tuple[Any, Any, int | None]]]:
    """Inside, a Warp launch runs nothing: it records the module variant it would load and compile,
    as ``(module, device, block_dim)``, into the yielded list, and returns.

    Warp compiles a module at the first launch of one of its kernels, one module after the other; a
    program run once in here (a physics step: hundreds of launches) names every module it needs, so
    that :func:`compile_recorded` can compile them side by side before it runs for real. The launch
    does everything up to the load (a generic kernel's overload, the block size), then finds no
    loaded module and returns, as Warp's own launch does. Loops and branches on device values
    (``capture_while`` / ``capture_if``) run their bodies once, and array copies are skipped, so
    that nothing on the device is read or written by a launch; arrays a program zeroes or fills
    directly are still zeroed or filled. Not thread-safe: no other thread may launch meanwhile.
    """
    from warp._src import context

    seen: list[tuple[Any, Any, int | None]] = []
    real_load, real_while, real_if, real_copy = context.Module.load, wp.capture_while, wp.capture_if, wp.copy

    def record(module: Any, device: Any, block_dim: int | None = None, *args: Any, **kwargs: Any) -> None:
        seen.append((module, context.runtime.get_device(device), block_dim))

    def body_once(condition: Any, while_body: Callable | Any, stream: Any = None, **kwargs: Any) -> None:
        if callable(while_body):
            while_body(**kwargs)

    def branches_once(condition: Any, on_true: Callable | Any = None, on_false: Callable | Any = None,
                      stream: Any = None, **kwargs: Any) -> None:
        for branch in (on_true, on_false):
            if callable(branch):
                branch(**kwargs)

    context.Module.load = record
    wp.capture_while, wp.capture_if, wp.copy = body_once, branches_once, lambda *args, **kwargs: None
    try:
        yield seen
    finally:
        context.Module.load = real_load
        wp.capture_while, wp.capture_if, wp.copy = real_while, real_if, real_copy


def compile_recorded(seen: list[tuple[Any, Any, int | None]], workers: int) -> int:
    """Load (compile, or read from Warp's kernel cache) every module variant ``seen`` names, up to
    ``workers`` at a time, as ``wp.force_load`` does for whole modules; returns how many. A program
    that then runs launches them without compiling. One variant per module, device and block size
    is loaded however often it was seen."""
    unique: dict[tuple[int, str, int | None], tuple[Any, Any, int | None]] = {}
    for module, device, block_dim in seen:
        unique.setdefault((id(module), str(device), block_dim), (module, device, block_dim))
    variants = list(unique.values())
    if workers <= 1:
        for module, device, block_dim in variants:
            module.load(device, block_dim)
        return len(variants)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for done in [pool.submit(module.load, device, block_dim) for module, device, block_dim in variants]:
            done.result()
    return len(variants)
