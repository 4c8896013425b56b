"""MuJoCo Warp's modules compiled in worker processes, a share each, into Warp's kernel cache.

Warp generates a module's code (its Python pass over every kernel, and the tile solvers' link-time
builds) under one lock per process; only the compiler after it runs side by side. For the G1's
programs compiled for sm_90 that locked part is a quarter of the work, so threads stop gaining long
before 16 of them. Worker processes each hold their own lock. Each rebuilds the same model as one
world on the same device, records the same programs (:func:`~isaac_adapter.backends.mujoco_warp_programs.program_variants`:
one order in every process), loads its share of the module variants, which compiles them into
the cache, and writes their names. The backend that started them compiles share 0 meanwhile, then
loads every module, the workers' from the cache.

Run by :class:`~isaac_adapter.backends.mujoco_warp.MujocoWarpBackend` (``compile_processes``), as
``python -m isaac_adapter.backends.compile_worker SPEC``.
"""

from __future__ import annotations

import enum
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


class CompileProcesses:
    """Worker processes started by :func:`start_compile_processes`; :meth:`wait` collects them."""

    def __init__(self, folder: Path, processes: list[subprocess.Popen]) -> None:
        self.folder = folder
        self.processes = processes

    def wait(self, timeout_s: float = 600.0) -> set[str]:
        """Wait for every worker, up to ``timeout_s`` in all; the names (``warp_stream.variant_names``)
        of the module variants they compiled. A worker that failed or is stopped at the timeout is
        named on stderr in one line, and its share is compiled by the caller."""
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
    """Start ``shares - 1`` workers, each compiling share ``i`` (1 to ``shares - 1``) of the module
    variants of the backend that ``model`` and the other arguments (as
    :class:`~isaac_adapter.backends.mujoco_warp.MujocoWarpBackend` takes them) build; share 0 is
    the caller's."""
    folder = Path(tempfile.mkdtemp(prefix="warp_compile_workers_"))
    model_path = folder / "model.mjb"
    mujoco.mj_saveModel(model, str(model_path), None)
    spec = {"model": str(model_path), "decimation": decimation, "device": device, "batched": list(batched),
            "nconmax": nconmax, "njmax": njmax, "print_overflow": print_overflow, "convex_box_box": convex_box_box,
            "sensors_every_substep": sensors_every_substep, "shares": shares, "warp": warp_settings()}
    # the worker imports this package from wherever this process found it
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])])}
    processes = []
    for index in range(1, shares):
        path = folder / f"share_{index}.pkl"
        path.write_bytes(pickle.dumps({**spec, "index": index, "result": str(folder / f"share_{index}.json")}))
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
    from isaac_adapter.backends.warp_stream import compile_recorded, variant_names

    model = mujoco.MjModel.from_binary_path(spec["model"])
    device = wp.get_device(spec["device"])
    # one world, since the workers share the device's memory; a kernel built for the world count would
    # be another module, named among the backend's compile_misses and compiled there
    m, d = device_model(model, 1, device, spec["batched"], nconmax=spec["nconmax"], njmax=spec["njmax"],
                        print_overflow=spec["print_overflow"], convex_box_box=spec["convex_box_box"])
    reset_mask = wp.zeros(1, dtype=bool, device=device)
    variants = program_variants(m, d, reset_mask, device, spec["decimation"], spec["sensors_every_substep"])
    share = variants[spec["index"]::spec["shares"]]
    compile_recorded(share, 1)
    Path(spec["result"]).write_text(json.dumps(variant_names(share)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
