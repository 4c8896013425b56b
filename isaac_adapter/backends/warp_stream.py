"""Warp work recorded into a torch CUDA graph: shared by the MuJoCo Warp backend and Isaac Lab's
Newton step (:mod:`isaac_adapter.tasks.g1_walk.graph_step` records either); the compile settings
both start with (:func:`forward_only_kernels`, :func:`machine_code_kernels`); and the kernels of a
program compiled side by side before it first runs (:func:`launches_recorded`, :func:`compile_recorded`,
and for a program that keeps state in Python, :func:`python_attributes_restored`; for one that
reads its launches' results, :func:`preload_modules`)."""

from __future__ import annotations

import importlib
import weakref
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import warp as wp

if TYPE_CHECKING:  # torch only where Warp meets torch's streams: MuJoCo Warp's compile workers run without it
    import torch


@contextmanager
def warp_on_torch_stream(device: torch.device | str) -> Iterator[None]:
    """Warp's launches go to torch's current stream on ``device`` (the capturing one inside
    ``torch.cuda.graph``), and while torch captures there, Warp knows that the capture was begun
    outside it, so that MuJoCo Warp's solver loop joins it as a conditional node.

    The stream is entered without a synchronisation: a synchronising switch would record a
    dependency on uncaptured work and break the capture.
    """
    import torch

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
    (``capture_while`` / ``capture_if``) run their bodies once. Memory that existed before is not
    written: array copies, fills and zeroings into it are skipped (a program that zeroes a buffer
    before its kernels fill it would otherwise leave it zeroed), while arrays the program allocates
    in here (a lazy first-call buffer it keeps) are initialised as it asks. An occupancy query
    (``wp.get_suggested_block_size``, which MuJoCo Warp's solver and collision asks on CUDA before
    it picks a block size) needs the kernel's machine code, so its module alone loads for real. Not
    thread-safe: no other thread may use Warp meanwhile.
    """
    from warp._src import context, types

    seen: list[tuple[Any, Any, int | None]] = []
    born: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()  # arrays allocated in here

    def new(arr: Any) -> bool:
        return born.get(id(arr)) is arr and getattr(arr, "deleter", None) is not None  # owns memory allocated here

    real = {"load": context.Module.load, "init": types.array.__init__, "zero_": types.array.zero_,
            "fill_": types.array.fill_, "assign": types.array.assign, "while": wp.capture_while,
            "if": wp.capture_if, "copy": wp.copy, "occupancy": context.get_suggested_block_size}

    def record(module: Any, device: Any, block_dim: int | None = None, *args: Any, **kwargs: Any) -> None:
        seen.append((module, context.runtime.get_device(device), block_dim))

    def init(arr: Any, *args: Any, **kwargs: Any) -> None:
        real["init"](arr, *args, **kwargs)
        born[id(arr)] = arr

    def into_new(name: str) -> Callable:
        def op(arr: Any, *args: Any, **kwargs: Any) -> Any:
            return real[name](arr, *args, **kwargs) if new(arr) else None
        return op

    def copy(dest: Any, src: Any, *args: Any, **kwargs: Any) -> None:
        if new(dest):
            real["copy"](dest, src, *args, **kwargs)

    def body_once(condition: Any, while_body: Callable | Any, stream: Any = None, **kwargs: Any) -> None:
        if callable(while_body):
            while_body(**kwargs)

    def branches_once(condition: Any, on_true: Callable | Any = None, on_false: Callable | Any = None,
                      stream: Any = None, **kwargs: Any) -> None:
        for branch in (on_true, on_false):
            if callable(branch):
                branch(**kwargs)

    def occupancy(kernel: Any, device: Any = None) -> tuple[int, int]:
        context.Module.load = real["load"]
        try:
            return real["occupancy"](kernel, device)
        finally:
            context.Module.load = record

    context.Module.load = record
    types.array.__init__ = init
    types.array.zero_, types.array.fill_, types.array.assign = (into_new(n) for n in ("zero_", "fill_", "assign"))
    wp.capture_while, wp.capture_if, wp.copy = body_once, branches_once, copy
    wp.get_suggested_block_size = context.get_suggested_block_size = occupancy
    try:
        yield seen
    finally:
        context.Module.load = real["load"]
        types.array.__init__ = real["init"]
        types.array.zero_, types.array.fill_, types.array.assign = real["zero_"], real["fill_"], real["assign"]
        wp.capture_while, wp.capture_if, wp.copy = real["while"], real["if"], real["copy"]
        wp.get_suggested_block_size = context.get_suggested_block_size = real["occupancy"]


@contextmanager
def python_attributes_restored(*owners: Any) -> Iterator[None]:
    """On exit, every attribute of ``owners`` (objects or classes) is as it was on entry: one
    rebound is bound to its old value again, one added is removed, and a set, dict or list is given
    back its old items in place (so that other holders of it see them too).

    A recorded run (:func:`launches_recorded`) runs a program's Python but none of its kernels, so
    whatever the Python keeps about the work would be wrong afterwards: Newton's step, under Isaac
    Lab, clears its pending model changes (whose kernels then never ran), swaps its two state
    buffers, counts its solver steps and caches contact conversions. Each is an attribute of the
    manager, its backend, solver, collision pipeline or contacts; an array changed in place by a
    kernel is not (no kernel ran). Names starting with ``__`` are left alone.
    """
    def attributes(owner: Any) -> dict[str, Any]:
        return {name: value for name, value in vars(owner).items() if not name.startswith("__")}

    def contents(value: Any) -> Any:
        return value.copy() if isinstance(value, (set, dict, list)) else None

    kept = [(owner, {name: (value, contents(value)) for name, value in attributes(owner).items()})
            for owner in owners if owner is not None]
    try:
        yield
    finally:
        for owner, before in kept:
            for name in attributes(owner).keys() - before.keys():
                delattr(owner, name)
            for name, (value, items) in before.items():
                if getattr(owner, name, None) is not value:
                    setattr(owner, name, value)
                if isinstance(value, (set, dict)):
                    value.clear()
                    value.update(items)
                elif isinstance(value, list):
                    value[:] = items


def unique_variants(seen: list[tuple[Any, Any, int | None]]) -> list[tuple[Any, Any, int | None]]:
    """The module variants ``(module, device, block_dim)`` of ``seen`` (:func:`launches_recorded`),
    each once, in the order of their first launch: the same order in every process that records the
    same program, so that processes that share the work walk them alike."""
    unique: dict[tuple[int, str, int | None], tuple[Any, Any, int | None]] = {}
    for module, device, block_dim in seen:
        unique.setdefault((id(module), str(device), block_dim), (module, device, block_dim))
    return list(unique.values())


def variant_names(variants: list[tuple[Any, Any, int | None]]) -> list[str]:
    """Names of module variants that are equal across processes exactly when Warp's kernel cache
    holds one for the other: the cache's module identifier (name and content hash) and the device."""
    return [f"{module.get_module_identifier(block_dim=block_dim)}@{device}" for module, device, block_dim in variants]


def compile_recorded(seen: list[tuple[Any, Any, int | None]], workers: int) -> int:
    """Load (compile, or read from Warp's kernel cache) every module variant ``seen`` names, up to
    ``workers`` at a time, as ``wp.force_load`` does for whole modules; returns how many. A program
    that then runs launches them without compiling. One variant per module, device and block size
    is loaded however often it was seen."""
    return len(_load_side_by_side(unique_variants(seen), workers))


def preload_modules(names: Iterable[str], device: Any, workers: int) -> dict[str, Any]:
    """Load the Warp modules of the Python modules ``names`` on ``device``, up to ``workers`` at a
    time, in the variant a plain launch there uses (block size 1 on the CPU, Warp's 256 on CUDA);
    returns ``{name: the loaded module executable}``. A name that does not import is skipped (another
    version of the package it belongs to).

    For a program whose launches cannot be recorded ahead because it reads their results (an env's
    build): its modules of import-time kernels are compiled side by side before it runs, and it then
    launches them without compiling. A module that gains a kernel or an overload while the program
    runs has another hash by then and is compiled again, one after the other as before: list only
    modules that keep their kernels (``tests_isaaclab`` checks the env's list in a fresh process).
    """
    device = wp.get_device(device)
    block_dim = 1 if device.is_cpu else 256  # what wp.launch passes without a block_dim
    modules = {}
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:
            continue
        modules[name] = wp.get_module(name)
    loaded = _load_side_by_side([(m, device, block_dim) for m in modules.values()], workers)
    return dict(zip(modules, loaded))


def _load_side_by_side(variants: list[tuple[Any, Any, int | None]], workers: int) -> list[Any]:
    """``module.load(device, block_dim)`` of each of ``variants``, up to ``workers`` at a time; the
    loaded executables in the same order.

    Each CUDA device's context is acquired here first, on the calling thread. Warp acquires it at the
    first read of ``Device.context``, without a lock; threads that race there each make a new stream
    the device's current one, and when the streams that lost are collected, Warp sets the context's
    current stream to CUDA's legacy stream. A later ``array.zero_()`` inside a graph capture then
    breaks the capture (CUDA error 906, then 901 at the next launch; BENCHMARKS.md, the cold start)."""
    for device in {str(device): wp.get_device(device) for _, device, _ in variants}.values():  # Device: unhashable
        if device.is_cuda:
            device.context  # noqa: B018  (acquired now, on this thread)
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        return [done.result() for done in [pool.submit(m.load, device, block_dim) for m, device, block_dim in variants]]
