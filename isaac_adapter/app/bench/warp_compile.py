"""Where a cold start of the G1 task on MuJoCo Warp spends its time: Warp's kernel compilation.

    python benchmarks/warp_compile.py                                  # Warp's CPU device, a fresh kernel cache
    python benchmarks/warp_compile.py --device cuda:0 --preload-workers 0 16
    python benchmarks/warp_compile.py --device cuda:0 --cache /tmp/wc   # warm: the cache of an earlier run
    python benchmarks/warp_compile.py --device cuda:0 --preload-workers 16 1 --preload-via launch force_load
    python benchmarks/warp_compile.py --preload-workers 0 --training-start   # and a whole training start
    python benchmarks/warp_compile.py --device cuda:0 --preload-workers 0 --optimization-level 1
    python benchmarks/warp_compile.py --preload-workers 0 --box-box convex primitive   # the feet's collider
    python benchmarks/warp_compile.py --preload-workers 0 --adjoints on off   # kernels with and without adjoints
    python benchmarks/warp_compile.py --sim isaaclab --preload-workers 0 --adjoints on off   # G1WalkDirectEnv (Isaac Lab venv)
    python benchmarks/warp_compile.py --device cuda:0 --preload-workers 0 --cuda-output ptx cubin   # machine code or PTX
    python benchmarks/warp_compile.py --device cuda:0 --preload-workers 0 --compile-workers 0 16   # modules side by side
    python benchmarks/warp_compile.py --sim isaaclab --preload-workers 0 --compile-workers 0 2 --build-preload on off
    python benchmarks/warp_compile.py --device cuda:0 --preload-workers 0 --compile-workers 16 --precompiled-headers on off
    python benchmarks/warp_compile.py --from-log runs/ttw/exact_s0/train.log   # what a training run loaded
    python benchmarks/warp_compile.py --cuda-arch 90                   # each module's GPU compile, on this CPU
    python benchmarks/warp_compile.py --cuda-arch 90 --solver cg       # the same with MuJoCo's CG solver
    python benchmarks/warp_compile.py --device cuda:0 --preload-workers 0 --compile-workers 16 --solver newton cg
    python benchmarks/warp_compile.py --device cuda:0 --num-envs 4096 --preload-workers 0 --compile-workers 16 \
        --compile-via threads processes      # the modules in 16 threads, or in 15 worker processes and this one

Each row runs in a fresh process with its own empty Warp kernel cache (unless ``--cache``), builds
the G1 backend (``make_warp_backend``: model upload and the first staging launches) and takes one
policy step, and prints the time of each phase and the compile time of the modules Warp loaded,
split into MuJoCo Warp's named modules (``mujoco_warp._src.smooth``, ...; Python modules of kernels)
and the per-model kernels it generates at the first call (each its own module). Warp compiles a
module the first time one of its kernels is launched, one after the other; with
``--preload-workers N`` the named modules seen in a cold run are compiled first, N at a time, in
the variant a launch loads (``backends.warp_stream.preload_modules``), before the backend is built.
The per-model kernels do not exist before the first call, so they still compile one by one.
``--preload-via force_load`` loads them with Warp's own ``wp.force_load(..., max_workers=N)``
instead, as the first try did.

``--training-start`` adds a whole training start: ``examples/g1_walk.py --task G1-Walk-Clock-Fast-v0
--symmetry both`` for one iteration on the same device and env count, in a fresh process with an
empty kernel cache (or ``--cache``), its wall clock and the same split of what Warp loaded. It says
whether training loads more than the one step above.

Each row says what a CUDA module compiles to: PTX, which the driver turns into machine code when it
loads it, or a CUBIN, Warp's choice when the driver is older than Warp's CUDA toolkit (both versions
are printed). ``--optimization-level`` compiles every row at that level instead of Warp's default
(-O3 on CUDA, -O2 on the CPU): faster compiles, perhaps slower kernels. ``--box-box`` picks how the
backend collides the G1's two foot boxes, one row each: ``primitive`` (the default, MuJoCo's
box-box algorithm) or ``convex`` (MuJoCo Warp's general GJK/EPA path, one more kernel to build).

``--cuda-output cubin ptx`` builds each row twice, its CUDA kernels compiled to machine code for the
device (CUBIN, the application's setting: ``machine_code_kernels``) and to PTX, which the driver
compiles again at load (Warp's own choice, ``auto``, when the driver is newer than its toolkit).
Without ``--cache`` every row also gets an empty CUDA driver JIT cache (``CUDA_CACHE_PATH``), so a
PTX row pays that second compilation as a fresh machine does.

``--compile-workers 0 16`` builds each row twice: as Warp does by itself, each module compiled at
its first launch, one after the other (0), and with the MuJoCo Warp backend first running its
programs once with every launch recorded instead of run, then compiling the modules they named 16
at a time (``env.warp_compile_workers``; ``backends.warp_stream.launches_recorded``). Unlike ``--preload-workers``, which compiles MuJoCo Warp's named
modules, this covers the per-model kernels too, which exist only once the model is known. With
``--sim isaaclab``, ``G1WalkDirectEnv`` records one physics step of Newton's instead
(``G1WalkDirectEnv.compile_physics_ahead``) and puts back what Newton's Python kept about it; before
its build it also loads the modules of import-time kernels that its build and step launch, as many at a
time (``g1_direct.PRELOADED_MODULES``); ``--build-preload on off`` adds a row without that preload.

``--precompiled-headers on off`` builds each row twice, with Warp's precompiled headers (its default:
each compiling thread first builds the header of Warp's native code for itself, in a directory of its
own that the process deletes at exit, then reuses it) and without (each module parses that header
again; ``wp.config.use_precompiled_headers``). Side by side, every worker thread builds its own.

``--compile-via threads processes`` builds each row with compile workers twice: in threads, and in
worker processes that write Warp's kernel cache (``env.warp_compile_via``,
``backends.compile_worker``); the column names how many module variants a worker claimed and did
not report (``compile_misses``), which the backend then compiled itself.

``--solver newton cg`` builds each row with MuJoCo's Newton solver (the model file's) and with CG
(``env.solver``): CG has no Hessian to factor, so its solver needs no Cholesky kernels.

``--adjoints on off`` builds each row twice, with Warp's adjoint (backward) code and without it
(``wp.config.enable_backward``; the application compiles without, ``forward_only_kernels``).
``--sim isaaclab`` builds ``G1WalkDirectEnv`` instead (Isaac Lab's Newton / MuJoCo-Warp; run in the
Isaac Lab venv with ``ISAACSIM_ASSET_ROOT`` set): its modules are Newton's and Isaac Lab's besides
MuJoCo Warp's, and count as per-model in the split.

``--from-log`` reads the module loads out of a log that Warp wrote (a training run's ``train.log``
under ``time_to_walk.py``) and prints the same split, with the slowest modules, measuring nothing.

``--cuda-arch 90`` needs no GPU: it builds the backend on Warp's CPU device, records the module
variants its step, staging and reset programs launch (``MujocoWarpBackend.recorded_launches``), and
compiles each for that CUDA architecture (sm_90: H100, H200) on this machine's CPU, one after the
other, with Warp's ahead-of-time compile, printing each module's seconds, slowest first: which
kernels a cold GPU start spends its compilation on. The variants are those of a CPU recording: on a
GPU some launches pick other block sizes or kernels (MuJoCo Warp asks the device), so the list is
close to a GPU start's, not the same.

Time to walk's wall clock (b) counts this compilation on a fresh machine (BENCHMARKS.md). A row
that fails is reported with its last error line and the others are still measured.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from isaac_adapter.app.bench.common import checkout_env, format_table
from isaac_adapter.tasks.g1_walk.config import SOLVERS, WARP_COMPILE_VIA

# MuJoCo Warp's modules of named kernels that one G1 step loads (a cold run on Warp's CPU device)
NAMED_MODULES = ("smooth", "constraint", "sensor", "forward", "passive", "support", "solver", "derivative")
LOAD_LINE = re.compile(r"Module (\S+) \S+ load on device '[^']+' took ([\d.]+) ms\s+\((compiled|cached)\)")


def compile_for_arch(arch: int, num_envs: int, solver: str = "newton") -> list[dict]:
    """``--cuda-arch``: the modules of the G1 backend's programs, recorded on Warp's CPU device, each
    compiled once (its default block size) for CUDA architecture ``arch`` in turn; a row per module,
    slowest first, with the seconds of CUDA's compiler apart (``compiler_s``): the rest is Warp's code
    generation, which holds one lock per process (``warp._src.codegen``), the tile solvers' link-time
    builds included."""
    import warp as wp
    import warp._src.build as warp_build

    from isaac_adapter.backends.warp_stream import forward_only_kernels
    from isaac_adapter.tasks.g1_walk.config import clock_fast_config
    from isaac_adapter.tasks.g1_walk.env import make_warp_backend

    wp.config.kernel_cache_dir = tempfile.mkdtemp(prefix="warp_cold_")
    forward_only_kernels()  # as the application compiles
    backend, _, _ = make_warp_backend(clock_fast_config(num_envs=num_envs, device="cpu", solver=solver), check_every=0)
    modules = {id(module): module for module, _, _ in backend.recorded_launches()}
    compiler = {"s": 0.0}
    build_cuda = warp_build.build_cuda

    def timed(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        start = time.perf_counter()
        try:
            return build_cuda(*args, **kwargs)
        finally:
            compiler["s"] += time.perf_counter() - start

    rows = []
    warp_build.build_cuda = timed
    try:
        with tempfile.TemporaryDirectory(prefix="warp_aot_") as out:
            for module in modules.values():
                compiler["s"] = 0.0
                start = time.perf_counter()
                wp.compile_aot_module(module, arch=arch, module_dir=out, use_ptx=False)
                rows.append({"module": module.name, "kernels": len(module.kernels),
                             "seconds": time.perf_counter() - start, "compiler_s": compiler["s"]})
    finally:
        warp_build.build_cuda = build_cuda
    return sorted(rows, key=lambda row: row["seconds"], reverse=True)


def print_arch_compile(arch: int, num_envs: int, solver: str = "newton", slowest: int = 12) -> None:
    """``--cuda-arch``'s table: the ``slowest`` modules, then the rest and the total."""
    rows = compile_for_arch(arch, num_envs, solver)
    total = sum(row["seconds"] for row in rows)

    def cells(name: str, group: list[dict]) -> list[str]:
        seconds, compiler = sum(r["seconds"] for r in group), sum(r["compiler_s"] for r in group)
        return [name, str(sum(r["kernels"] for r in group)), f"{seconds:.2f}", f"{100 * seconds / total:.1f}",
                f"{seconds - compiler:.2f}", f"{compiler:.2f}"]

    table = [cells(row["module"], [row]) for row in rows[:slowest]]
    if rows[slowest:]:
        table.append(cells(f"the other {len(rows[slowest:])} modules", rows[slowest:]))
    table.append(cells(f"all {len(rows)} modules", rows))
    print(f"G1-Walk-Clock-Fast-v0 on MuJoCo Warp, {solver} solver: the modules a CPU recording of its programs names, "
          f"compiled for sm_{arch} on this CPU one after the other (Warp's precompiled header built by the first); "
          "code generation runs under one lock per process, CUDA's compiler after it does not")
    print(format_table(["module", "kernels", "compile s", "share %", "code generation s", "CUDA compiler s"], table))


def split_loads(log: str) -> dict[str, float]:
    """Compile and cache-load seconds of the modules in Warp's load lines ``log``, split into
    MuJoCo Warp's named modules and the per-model kernels (``..._locals_...`` modules)."""
    out = {"named_compiled_s": 0.0, "named_n": 0, "per_model_compiled_s": 0.0, "per_model_n": 0, "cached_s": 0.0,
           "cached_n": 0}
    for name, ms, how in LOAD_LINE.findall(log):
        seconds = float(ms) / 1000
        if how == "cached":
            out["cached_s"] += seconds
            out["cached_n"] += 1
        elif name.startswith("mujoco_warp."):
            out["named_compiled_s"] += seconds
            out["named_n"] += 1
        else:
            out["per_model_compiled_s"] += seconds
            out["per_model_n"] += 1
    return out


def one_run(device: str, num_envs: int, preload_workers: int, cache: str | None,
            optimization_level: int | None = None, box_box: str = "primitive", adjoints: bool = False,
            sim: str = "warp", cuda_output: str = "cubin", compile_workers: int = 0, build_preload: bool = True,
            preload_via: str = "launch", precompiled_headers: bool = True, solver: str = "newton",
            compile_via: str = "threads") -> dict:
    """Build the backend (``sim="isaaclab"``: ``G1WalkDirectEnv``) and take one step in this process;
    the phase times and the load split. A run that fails writes the end of Warp's log (the modules
    it loaded last) to stderr before it raises."""
    import warp as wp

    wp.config.kernel_cache_dir = cache or tempfile.mkdtemp(prefix="warp_cold_")
    wp.config.optimization_level = optimization_level  # None: Warp's own (-O3 on CUDA, -O2 on the CPU)
    wp.config.enable_backward = adjoints
    wp.config.cuda_output = None if cuda_output == "auto" else cuda_output
    wp.config.use_precompiled_headers = precompiled_headers
    log = io.StringIO()
    row: dict = {"device": device, "preload_workers": preload_workers, "cache": "given" if cache else "empty",
                 "optimization_level": optimization_level, "box_box": box_box if sim == "warp" else "-",
                 "adjoints": adjoints, "sim": sim, "compile_workers": compile_workers,
                 "build_preload": build_preload if sim == "isaaclab" and compile_workers else None,
                 "preload_via": preload_via if preload_workers else None, "precompiled_headers": precompiled_headers,
                 "solver": solver, "compile_via": compile_via if compile_workers > 1 else None}
    try:
        with contextlib.redirect_stdout(log):
            _build_and_step(row, device, num_envs, preload_workers, preload_via, box_box, sim, compile_workers,
                            build_preload, solver, compile_via)
    except BaseException:
        print("".join(log.getvalue().splitlines(keepends=True)[-30:]), file=sys.stderr, flush=True)
        raise
    row["total_s"] = row["preload_s"] + row["build_s"] + row["first_step_s"]
    row.update(split_loads(log.getvalue()))
    return row


def _build_and_step(row: dict, device: str, num_envs: int, preload_workers: int, preload_via: str,
                    box_box: str, sim: str, compile_workers: int, build_preload: bool, solver: str,
                    compile_via: str = "threads") -> None:
    """:func:`one_run`'s measured part (Warp's log going where stdout goes): the phase times into ``row``."""
    import warp as wp

    wp.init()
    # what a CUDA module compiles to: PTX (the driver finishes it at load) or CUBIN (Warp's
    # choice when the driver is older than Warp's toolkit, and the application's), and the two
    # versions behind Warp's choice
    row["output"] = wp.get_device(device).get_cuda_output_format() or "native"
    row["toolkit"], row["driver"] = wp.get_cuda_toolkit_version(), wp.get_cuda_driver_version()
    import mujoco_warp  # noqa: F401  (imported before the clock starts: its import time is no phase's)
    import torch

    from isaac_adapter.backends.warp_stream import preload_modules
    from isaac_adapter.tasks.g1_walk.config import clock_fast_config
    from isaac_adapter.tasks.g1_walk.env import make_warp_backend

    start = time.perf_counter()
    named = [f"mujoco_warp._src.{name}" for name in NAMED_MODULES]
    if preload_workers and preload_via == "force_load":  # Warp's own call, as first tried
        for name in named:
            importlib.import_module(name)
        wp.force_load(device=device, modules=[wp.get_module(name) for name in named], max_workers=preload_workers)
    elif preload_workers:  # in the variant a launch loads
        preload_modules(named, device, preload_workers)
    row["preload_s"] = time.perf_counter() - start
    start = time.perf_counter()
    cfg = clock_fast_config(num_envs=num_envs, device=device, warp_box_box=box_box,
                            warp_compile_workers=compile_workers, warp_compile_via=compile_via, solver=solver)
    if sim == "isaaclab":
        from isaac_adapter.isaaclab import g1_direct
        from isaac_adapter.isaaclab.g1_direct import make_g1_direct_env

        wp.config.quiet = False  # Isaac Lab's import silences the module load lines the split reads

        if not build_preload:  # the env as it was before it loaded these ahead of its build
            g1_direct.PRELOADED_MODULES = ()

        env = make_g1_direct_env(cfg, device=device)
        row["build_s"] = time.perf_counter() - start
        start = time.perf_counter()
        env.reset()
        env.step(torch.zeros(num_envs, env.num_actions, device=device))
    else:
        backend, nominal, _ = make_warp_backend(cfg, check_every=0)
        row["build_s"] = time.perf_counter() - start
        row["compile_misses"] = len(backend.compile_misses)
        start = time.perf_counter()
        backend.step(nominal[7:].to(device).expand(num_envs, -1).contiguous())
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    row["first_step_s"] = time.perf_counter() - start


def _via(row: dict) -> str:
    """A row's way of compiling ahead: threads, or processes with the modules a worker claimed and
    did not report (``compile_misses``)."""
    if row.get("compile_via") == "processes":
        return f"processes ({row.get('compile_misses', '-')})"
    return row.get("compile_via") or "-"


def slowest_loads(log: str, count: int = 3) -> list[tuple[str, float]]:
    """The ``count`` modules of Warp's load lines ``log`` that took longest: ``(name, seconds)``."""
    loads = [(name, float(ms) / 1000) for name, ms, _ in LOAD_LINE.findall(log)]
    return sorted(loads, key=lambda load: load[1], reverse=True)[:count]


def print_log_loads(path: str) -> None:
    """``--from-log``: the load split and the slowest modules of a log Warp wrote."""
    try:
        log = Path(path).read_text(errors="replace")
    except OSError as err:
        raise SystemExit(f"error: --from-log {path}: {err.strerror or err}") from None
    r = split_loads(log)
    if not r["named_n"] + r["per_model_n"] + r["cached_n"]:
        raise SystemExit(f"error: --from-log {path}: no Warp module load lines in it (Warp logs them unless quiet)")
    print(f"Warp module loads in {path}")
    print(format_table(["compiled s", *LOAD_HEADERS],
                       [[f"{r['named_compiled_s'] + r['per_model_compiled_s']:.1f}", *load_cells(r)]]))
    print("slowest: " + "; ".join(f"{name} {seconds:.1f} s" for name, seconds in slowest_loads(log)))


LOAD_HEADERS = ["named: n / compile s", "per-model: n / compile s", "cached: n / s"]


def load_cells(r: dict) -> list[str]:
    """The :data:`LOAD_HEADERS` cells of a :func:`split_loads` result."""
    return [f"{r['named_n']} / {r['named_compiled_s']:.1f}", f"{r['per_model_n']} / {r['per_model_compiled_s']:.1f}",
            f"{r['cached_n']} / {r['cached_s']:.1f}"]


def _output(row: dict) -> str:
    """The table's output column: ``ptx`` / ``cubin`` with Warp's toolkit and the driver, ``native``
    (the CPU), or ``-`` (a row measured before the column existed)."""
    output = row.get("output", "-")
    if output in ("native", "-"):
        return output
    return f"{output} (toolkit {_version(row['toolkit'])}, driver {_version(row['driver'])})"


def _preload(row: dict) -> str:
    """The table's preload cell: the workers, and ``(wp.force_load)`` where Warp's own call loaded them."""
    return str(row["preload_workers"]) + (" (wp.force_load)" if row.get("preload_via") == "force_load" else "")


def _on_off(row: dict, key: str) -> str:
    """A yes/no setting's table cell: ``on`` / ``off``, ``-`` where the row has none (a row measured
    before the column existed, or one the setting does not apply to: the build preload without
    compile workers or off Isaac Lab)."""
    value = row.get(key)
    return "-" if value is None else ("on" if value else "off")


def _version(version: list[int] | tuple[int, ...] | None) -> str:
    """``(13, 4)`` as ``13.4``; ``?`` when Warp found no such version (no driver)."""
    return "?" if version is None else ".".join(str(part) for part in version)


def failure(done: subprocess.CompletedProcess) -> str:
    """A failed child run in one line: its exit status and its last line of output."""
    return f"the run failed (exit {done.returncode}): {(done.stderr or done.stdout).strip().splitlines()[-1:]}"


def training_start(device: str, num_envs: int, cache: str | None) -> dict:
    """One iteration of ``examples/g1_walk.py`` in a fresh process: wall clock and the load split."""
    root = Path(__file__).resolve().parents[3]  # the checkout
    with tempfile.TemporaryDirectory(prefix="warp_start_") as tmp:
        cmd = [sys.executable, str(root / "examples" / "g1_walk.py"), "--sim", "warp", "--device", device,
               "--num_envs", str(num_envs), "--max_iterations", "1", "--task", "G1-Walk-Clock-Fast-v0",
               "--symmetry", "both", "--log-dir", str(Path(tmp) / "run")]
        env = {**os.environ, "WARP_CACHE_PATH": cache or str(Path(tmp) / "kernels")}
        start = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env, cwd=root)
        wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(failure(done))
    return {"wall_s": wall, **split_loads(done.stdout)}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu", help="Warp device: cpu, or cuda:0")
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--preload-workers", type=int, nargs="+", default=[0, 2],
                   help="one row each; 0: no preload (Warp's own serial loading)")
    p.add_argument("--preload-via", nargs="+", choices=("launch", "force_load"), default=["launch"],
                   help="how --preload-workers loads the named modules, one row each: in the variant a launch loads "
                   "(launch, default) or by Warp's wp.force_load(..., max_workers=N), as first tried")
    p.add_argument("--cache", default=None, help="a kernel cache directory to reuse (default: an empty one per row)")
    p.add_argument("--optimization-level", type=int, choices=range(4), default=None,
                   help="Warp's compiler optimisation level for every row (default: Warp's own, -O3 on CUDA, -O2 on the CPU)")
    p.add_argument("--box-box", nargs="+", choices=("primitive", "convex"), default=["primitive"],
                   help="how the foot boxes collide (the task's env.warp_box_box), one row each (default: primitive)")
    p.add_argument("--adjoints", nargs="+", choices=("on", "off"), default=["off"],
                   help="compile Warp's adjoint (backward) code too, one row each (default: off, as the application)")
    p.add_argument("--cuda-output", nargs="+", choices=("cubin", "ptx", "auto"), default=["cubin"],
                   help="what CUDA kernels compile to, one row each: cubin (default, as the application), ptx, or "
                   "auto (Warp's own choice)")
    p.add_argument("--compile-workers", type=int, nargs="+", default=[0], metavar="N",
                   help="the MuJoCo Warp backend finds the modules of its programs and compiles them N at a time "
                   "before they run (env.warp_compile_workers), one row each (default 0: each at its first launch)")
    p.add_argument("--compile-via", nargs="+", choices=WARP_COMPILE_VIA, default=["threads"],
                   help="with --compile-workers N > 1: compile in N threads (default) or in N - 1 worker processes and "
                   "this one (env.warp_compile_via), one row each")
    p.add_argument("--build-preload", nargs="+", choices=("on", "off"), default=["on"],
                   help="with --sim isaaclab and compile workers: G1WalkDirectEnv first loads the modules its build and "
                   "step launch (on, as the env does) or leaves them to the build (off), one row each")
    p.add_argument("--precompiled-headers", nargs="+", choices=("on", "off"), default=["on"],
                   help="compile with Warp's precompiled headers (on, Warp's default) or without, one row each")
    p.add_argument("--solver", nargs="+", choices=SOLVERS, default=["newton"],
                   help="MuJoCo's constraint solver (the task's env.solver), one row each (default: newton, the "
                   "model file's); with --cuda-arch, the first")
    p.add_argument("--sim", choices=("warp", "isaaclab"), default="warp",
                   help="what each row builds: the MuJoCo Warp backend, or G1WalkDirectEnv (Isaac Lab venv)")
    p.add_argument("--training-start", action="store_true",
                   help="also time one iteration of examples/g1_walk.py from the same cache state")
    p.add_argument("--from-log", metavar="LOG", default=None,
                   help="print the module loads of a log Warp wrote (a training run's train.log) and measure nothing")
    p.add_argument("--cuda-arch", type=int, default=None, metavar="ARCH",
                   help="compile the backend's modules for this CUDA architecture (90: H100, H200) on this CPU, one "
                   "at a time, and print each one's seconds; no GPU needed, measures nothing else")
    p.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a row, in this process, as JSON
    args = p.parse_args(argv)
    if args.from_log:
        print_log_loads(args.from_log)
        return
    if args.cuda_arch is not None:
        if args.cuda_arch < 50:
            p.error(f"--cuda-arch is a CUDA compute capability as one number (90 for sm_90), got {args.cuda_arch}")
        print_arch_compile(args.cuda_arch, args.num_envs, args.solver[0])
        return
    if args.training_start and args.optimization_level is not None:
        p.error("--optimization-level sets the one-step rows' level; --training-start runs g1_walk.py at Warp's "
                "default: run the two in separate commands")
    if any(workers < 0 for workers in args.compile_workers):
        p.error("--compile-workers must be >= 0 (0: each module compiles at its first launch)")
    if "processes" in args.compile_via and args.sim != "warp":
        p.error("--compile-via processes is MuJoCo Warp's; Isaac Lab compiles with threads")
    if args.training_start and args.sim != "warp":
        p.error("--training-start runs g1_walk.py on MuJoCo Warp; run it without --sim isaaclab")
    if args.one:
        print("ROW " + json.dumps(one_run(args.device, args.num_envs, args.preload_workers[0], args.cache,
                                          args.optimization_level, args.box_box[0], args.adjoints[0] == "on",
                                          args.sim, args.cuda_output[0], args.compile_workers[0],
                                          args.build_preload[0] == "on", args.preload_via[0],
                                          args.precompiled_headers[0] == "on", args.solver[0], args.compile_via[0])))
        return
    rows, failed = [], []
    # the build preload is G1WalkDirectEnv's, with compile workers: elsewhere one row stands for both
    # so is the way of the preload, with preload workers
    combos = [(b, w, v, a, o, c, bp, h, sv, cv)
              for b in args.box_box for w in args.preload_workers for v in args.preload_via for a in args.adjoints
              for o in args.cuda_output for c in args.compile_workers for bp in args.build_preload
              for h in args.precompiled_headers for sv in args.solver for cv in args.compile_via
              if (bp == args.build_preload[0] or (args.sim == "isaaclab" and c > 0))
              and (v == args.preload_via[0] or w > 0) and (cv == args.compile_via[0] or c > 1)]
    for box_box, workers, via, adjoints, output, ahead, build_preload, headers, solver, compile_via in combos:
        cmd = [sys.executable, "-m", "isaac_adapter.app.bench.warp_compile", "--one", "--device", args.device,
               "--num-envs", str(args.num_envs), "--sim", args.sim, "--adjoints", adjoints, "--cuda-output", output,
               "--preload-workers", str(workers), "--box-box", box_box, "--compile-workers", str(ahead),
               "--build-preload", build_preload, "--preload-via", via, "--precompiled-headers", headers,
               "--solver", solver, "--compile-via", compile_via] + (
               ["--cache", args.cache] if args.cache else []) + (
               ["--optimization-level", str(args.optimization_level)] if args.optimization_level is not None else [])
        with tempfile.TemporaryDirectory(prefix="cuda_jit_") as driver_cache:
            env = checkout_env()
            if not args.cache:  # cold as a fresh machine: the driver's cache of machine code for PTX empty too
                env["CUDA_CACHE_PATH"] = driver_cache
            done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
        line = next((ln for ln in done.stdout.splitlines() if ln.startswith("ROW ")), None)
        if line is None:  # keep the rows measured so far; say why this one has none
            failed.append(f"--preload-workers {workers}" + (f" --preload-via {via}" if via != "launch" else "")
                          + f" --box-box {box_box} --adjoints {adjoints} "
                          f"--cuda-output {output} --compile-workers {ahead}"
                          + (f" --build-preload {build_preload}" if args.sim == "isaaclab" and ahead else "")
                          + (f" --precompiled-headers {headers}" if headers != "on" else "")
                          + (f" --solver {solver}" if solver != "newton" else "")
                          + (f" --compile-via {compile_via}" if compile_via != "threads" else "")
                          + f": {failure(done)}")
            print(failed[-1], flush=True)
            continue
        rows.append(json.loads(line[4:]))
        print(rows[-1], flush=True)
    level = "Warp's default" if args.optimization_level is None else f"-O{args.optimization_level}"
    built = "MuJoCo Warp" if args.sim == "warp" else "Isaac Lab (G1WalkDirectEnv)"
    print(f"\nG1-Walk-Clock-Fast-v0 on {built}, {args.num_envs} envs, device {args.device}, "
          f"kernel cache {'given' if args.cache else 'empty per row (and the driver JIT cache)'}, optimisation {level}")
    preloads = any(r.get("build_preload") is not None for r in rows)  # Isaac Lab rows with compile workers
    without_headers = any(r.get("precompiled_headers") is False for r in rows)  # a column only then
    solvers = any(r.get("solver", "newton") != "newton" for r in rows)  # likewise
    processes = any(r.get("compile_via") == "processes" for r in rows)  # likewise
    table = [[_preload(r), str(r.get("compile_workers", "-")), *([_via(r)] if processes else []),
              *([_on_off(r, "build_preload")] if preloads else []),
              r.get("box_box", "-"), _on_off(r, "adjoints"),
              *([_on_off(r, "precompiled_headers")] if without_headers else []),
              *([r.get("solver", "newton")] if solvers else []), _output(r),
              f"{r['preload_s']:.1f}", f"{r['build_s']:.1f}", f"{r['first_step_s']:.1f}", f"{r['total_s']:.1f}",
              *load_cells(r)] for r in rows]
    print(format_table(["preload workers", "compile workers", *(["compile via (misses)"] if processes else []),
                        *(["build preload"] if preloads else []), "box-box",
                        "adjoints", *(["precompiled headers"] if without_headers else []),
                        *(["solver"] if solvers else []), "output", "preload s",
                        "build s", "first step s", "total s", *LOAD_HEADERS], table))
    runs = len(combos)
    if args.training_start:
        runs += 1
        try:
            r = training_start(args.device, args.num_envs, args.cache)
        except RuntimeError as err:
            failed.append(f"--training-start: {err}")
            print(failed[-1], flush=True)
        else:
            print(f"\na whole training start: examples/g1_walk.py --task G1-Walk-Clock-Fast-v0 --symmetry both, "
                  f"1 iteration, {args.num_envs} envs, device {args.device}")
            print(format_table(["wall s", *LOAD_HEADERS], [[f"{r['wall_s']:.1f}", *load_cells(r)]]))
    if failed:
        raise SystemExit(f"error: {len(failed)} of {runs} rows failed (their errors above)")


if __name__ == "__main__":
    main()
