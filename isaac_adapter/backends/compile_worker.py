"""MuJoCo Warp's modules compiled in worker processes into Warp's kernel cache.

Warp generates a module's code (its Python pass over every kernel, and the tile solvers' link-time
builds) under one lock per process; only the compiler after it runs side by side. For the G1's
programs compiled for sm_90 that locked part is a quarter of the work, so threads stop gaining long
before 16 of them. Worker processes each hold their own lock. Each rebuilds the same model as one
world on the same device and records the same programs (:func:`~isaac_adapter.backends.mujoco_warp_programs.program_variants`).
Every process, the backend's too, then walks the module variants in one order and compiles each that
no other process has claimed yet (:func:`compile_claimed`): the work is shared as it goes, so a
worker that starts late or draws a slow module takes fewer. The workers' modules land in the cache
and their names in a file each; the backend then loads every module, the workers' from the cache.

Run by :class:`~isaac_adapter.backends.mujoco_warp.MujocoWarpBackend` (``compile_processes``), as
``python -m isaac_adapter.backends.compile_worker SPEC``.
"""

from __future__ import annotations

import enum
import hashlib
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import mujoco


def warp_settings() -> dict[str, Any]:
    """Warp's process-wide compile settings (``wp.config``) as they are here, for a worker to take:
    they go into the modules' hashes, and the kernel cache folder is where the workers write."""
    import warp as wp

    wp.init()  # resolves the kernel cache folder
    return {name: value for name, value in vars(wp.config).items()
            if not name.startswith("_") and name != "version"
            and (value is None or isinstance(value, (bool, int, float, str, enum.Enum)))}


def claim_file(folder: Path, name: str) -> Path:
    """The file whose making claims the module variant ``name`` among the processes sharing ``folder``."""
    return folder / f"claim_{hashlib.sha256(name.encode()).hexdigest()[:32]}"


def compile_claimed(variants: list[tuple[Any, Any, int | None]], folder: Path) -> list[str]:
    """Compile each of the module ``variants`` (``warp_stream.unique_variants``) that no process
    sharing ``folder`` has claimed, claiming it first (a file made there only if none exists); the
    names (``warp_stream.variant_names``) of those compiled here. A name is claimed once, whichever
    process walks to it first."""
    from isaac_adapter.backends.warp_stream import compile_recorded, variant_names

    compiled = []
    for variant, name in zip(variants, variant_names(variants)):
        try:
            os.close(os.open(claim_file(folder, name), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            continue
        compile_recorded([variant], 1)
        compiled.append(name)
    return compiled


class CompileProcesses:
    """Worker processes started by :func:`start_compile_processes`: :meth:`compile_claimed` takes
    this process's part of the work, :meth:`wait` collects theirs."""

    def __init__(self, folder: Path, processes: list[subprocess.Popen]) -> None:
        self.folder = folder
        self.processes = processes

    def compile_claimed(self, variants: list[tuple[Any, Any, int | None]]) -> list[str]:
        """:func:`compile_claimed` beside the workers: the names of the variants compiled here."""
        return compile_claimed(variants, self.folder)

    def wait(self, timeout_s: float = 600.0) -> set[str]:
        """Wait for every worker, up to ``timeout_s`` in all; the names (``warp_stream.variant_names``)
        of the module variants they compiled. A worker that failed or is stopped at the timeout is
        named on stderr in one line, and the caller compiles what it had claimed."""
        compiled: set[str] = set()
        deadline = time.monotonic() + timeout_s
        try:
            for index, process in enumerate(self.processes, start=1):
                try:
                    code = process.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
                    code = f"nothing, stopped after {timeout_s:g} s"
                result = self.folder / f"share_{index}.json"
                if code == 0 and result.is_file():
                    compiled.update(json.loads(result.read_text()))
                    continue
                log = (self.folder / f"share_{index}.log").read_text(errors="replace").strip().splitlines()
                print(f"warning: Warp compile worker {index} of {len(self.processes)} exited with {code} "
                      f"({log[-1] if log else 'no output'}); its modules compile in this process",
                      file=sys.stderr)
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
        return compiled


def start_compile_processes(model: mujoco.MjModel, decimation: int, device: str, batched: Sequence[str], *,
                            shares: int, nconmax: int, njmax: int, print_overflow: bool, convex_box_box: bool,
                            sensors_every_substep: bool) -> CompileProcesses:
    """Start ``shares - 1`` workers, each compiling the module variants it claims of the backend that
    ``model`` and the other arguments (as :class:`~isaac_adapter.backends.mujoco_warp.MujocoWarpBackend`
    takes them) build; the caller claims beside them (:meth:`CompileProcesses.compile_claimed`)."""
    folder = Path(tempfile.mkdtemp(prefix="warp_compile_workers_"))
    model_path = folder / "model.mjb"
    mujoco.mj_saveModel(model, str(model_path), None)
    spec = {"model": str(model_path), "decimation": decimation, "device": device, "batched": list(batched),
            "nconmax": nconmax, "njmax": njmax, "print_overflow": print_overflow, "convex_box_box": convex_box_box,
            "sensors_every_substep": sensors_every_substep, "warp": warp_settings()}
    # the worker imports this package from wherever this process found it
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])])}
    processes = []
    for index in range(1, shares):
        path = folder / f"share_{index}.pkl"
        path.write_bytes(pickle.dumps({**spec, "result": str(folder / f"share_{index}.json")}))
        with open(folder / f"share_{index}.log", "wb") as log:
            processes.append(subprocess.Popen([sys.executable, "-m", __name__, str(path)], env=env, stdout=log,
                                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
    return CompileProcesses(folder, processes)


def main(argv: list[str] | None = None) -> int:
    spec = pickle.loads(Path((sys.argv[1:] if argv is None else argv)[0]).read_bytes())
    import warp as wp

    settings = dict(spec["warp"])
    cache = settings.pop("kernel_cache_dir")
    for name, value in settings.items():
        setattr(wp.config, name, value)
    # read when Warp starts, which puts a folder of its version under the one it is given
    wp.config.kernel_cache_dir = os.path.dirname(cache) if os.path.basename(cache) == wp.config.version else cache
    wp.init()
    if os.path.realpath(wp.config.kernel_cache_dir) != os.path.realpath(cache):
        raise SystemExit(f"the kernel cache here is {wp.config.kernel_cache_dir}, not {cache}")
    from isaac_adapter.backends.mujoco_warp_programs import device_model, program_variants

    model = mujoco.MjModel.from_binary_path(spec["model"])
    device = wp.get_device(spec["device"])
    # one world, since the workers share the device's memory; a kernel built for the world count would
    # be another module under another name, which the backend claims and compiles itself
    m, d = device_model(model, 1, device, spec["batched"], nconmax=spec["nconmax"], njmax=spec["njmax"],
                        print_overflow=spec["print_overflow"], convex_box_box=spec["convex_box_box"])
    reset_mask = wp.zeros(1, dtype=bool, device=device)
    variants = program_variants(m, d, reset_mask, device, spec["decimation"], spec["sensors_every_substep"])
    compiled = compile_claimed(variants, Path(spec["result"]).parent)
    Path(spec["result"]).write_text(json.dumps(compiled))
    return 0


if __name__ == "__main__":
    sys.exit(main())
