"""Compiling a Warp program's modules ahead, side by side (``backends.warp_stream``): a recorded
launch runs nothing and names its module; the MuJoCo Warp backend's ahead list holds every module
variant its programs then load, and compiling ahead changes no result."""

from __future__ import annotations

import pytest

wp = pytest.importorskip("warp")
torch = pytest.importorskip("torch")

from isaac_adapter.backends.warp_stream import (  # noqa: E402
    compile_recorded,
    launches_recorded,
    python_attributes_restored,
)


@wp.kernel
def _write_one(out: wp.array(dtype=float)):
    out[wp.tid()] = 1.0


def test_a_recorded_launch_runs_nothing_and_names_its_module() -> None:
    out = wp.zeros(4, dtype=float, device="cpu")
    copied = wp.zeros(4, dtype=float, device="cpu")
    bodies = []
    with launches_recorded() as seen:
        wp.launch(_write_one, dim=4, inputs=[out], device="cpu")
        wp.copy(copied, wp.full(4, 7.0, dtype=float, device="cpu"))
        wp.capture_while(wp.ones(1, dtype=int, device="cpu"), while_body=lambda **kw: bodies.append(kw), tag="while")
        wp.capture_if(wp.ones(1, dtype=int, device="cpu"), on_true=lambda: bodies.append("true"),
                      on_false=lambda: bodies.append("false"))
    assert out.numpy().tolist() == [0.0] * 4 and copied.numpy().tolist() == [0.0] * 4  # nothing ran
    assert [(module, str(device)) for module, device, _ in seen] == [(_write_one.module, "cpu")]
    assert bodies == [{"tag": "while"}, "true", "false"]  # a device loop or branch: its bodies once
    assert compile_recorded(seen + seen, workers=2) == 1  # one variant, however often it was seen
    wp.launch(_write_one, dim=4, inputs=[out], device="cpu")  # Warp's own launch is back
    assert out.numpy().tolist() == [1.0] * 4


@wp.kernel
def _write_two(out: wp.array(dtype=float)):
    out[wp.tid()] = 2.0


def test_an_occupancy_query_in_a_recorded_run_loads_its_module_for_real(monkeypatch) -> None:
    """MuJoCo Warp's solver asks ``wp.get_suggested_block_size`` on CUDA before it launches; Warp
    answers from the kernel's loaded machine code (on the CPU it answers (1, 1) without loading), so
    inside a recording that one module must load for real. The stand-in does what Warp's query does
    on CUDA: load the module, or raise."""
    from warp._src import context

    def query(kernel, device=None):  # noqa: ANN001, ANN202
        if kernel.module.load(context.runtime.get_device(device)) is None:
            raise RuntimeError(f"Failed to load module for kernel '{kernel.key}'")
        return (256, 1)

    monkeypatch.setattr(context, "get_suggested_block_size", query)
    monkeypatch.setattr(wp, "get_suggested_block_size", query)
    out = wp.zeros(4, dtype=float, device="cpu")
    with launches_recorded() as seen:
        assert wp.get_suggested_block_size(_write_two, "cpu") == (256, 1)
        wp.launch(_write_two, dim=4, inputs=[out], device="cpu")
    assert out.numpy().tolist() == [0.0] * 4  # the launch after the query still ran nothing
    assert [module for module, _, _ in seen] == [_write_two.module]
    assert wp.get_suggested_block_size is query and context.get_suggested_block_size is query  # put back


def test_modules_loaded_side_by_side_find_the_cuda_context_acquired_on_the_calling_thread(monkeypatch) -> None:
    """Warp acquires a CUDA context at the first read of ``Device.context``, unlocked: loads racing
    there leave the context's current stream on CUDA's legacy stream, which breaks a later graph
    capture. Each device's context is read once, on the calling thread, before any load starts."""
    import threading

    from isaac_adapter.backends import warp_stream

    events = []

    class FakeCuda:
        is_cuda = True

        @property
        def context(self):
            events.append(("context", threading.current_thread()))
            return 1

    class FakeModule:
        def __init__(self, name):
            self.name = name

        def load(self, device, block_dim):
            events.append(("load", threading.current_thread()))
            return (self.name, block_dim)

    cuda, real_get_device = FakeCuda(), wp.get_device
    monkeypatch.setattr(warp_stream.wp, "get_device", lambda device: cuda if device == "cuda:0" else real_get_device(device))
    variants = [(FakeModule(f"m{i}"), "cuda:0", 256) for i in range(6)] + [(FakeModule("cpu"), "cpu", 1)]
    loaded = warp_stream._load_side_by_side(variants, workers=4)
    assert loaded == [(f"m{i}", 256) for i in range(6)] + [("cpu", 1)]
    assert events[0] == ("context", threading.main_thread())
    assert [kind for kind, _ in events].count("context") == 1  # the CPU device has none
    assert sorted(kind for kind, _ in events[1:]) == ["load"] * 7


def test_python_attributes_are_put_back_as_they_were() -> None:
    """What a recorded run of a program with Python state leaves behind (as Newton's step does: a
    consumed set of pending changes, swapped buffers, a counter, a cache made on first use) is put
    back: rebound names to their old objects, added names removed, containers refilled in place."""
    class Manager:
        pending = {"dof_properties"}
        steps = 0

    class Backend:
        pass

    backend = Backend()
    state_0, state_1, callbacks = object(), object(), ["sensors"]
    backend.state_0, backend.state_1, backend.callbacks = state_0, state_1, callbacks
    pending = Manager.pending
    with python_attributes_restored(Manager, backend, None):
        Manager.pending.clear()  # emptied in place ...
        Manager.pending = set()  # ... and rebound
        Manager.steps += 1
        Manager.cache = "made on first use"
        backend.state_0, backend.state_1 = backend.state_1, backend.state_0
        backend.callbacks.append("added while recording")
    assert Manager.pending is pending and pending == {"dof_properties"} and Manager.steps == 0
    assert not hasattr(Manager, "cache")
    assert backend.state_0 is state_0 and backend.state_1 is state_1
    assert backend.callbacks is callbacks and callbacks == ["sensors"]


def test_the_backend_compiles_ahead_every_module_its_programs_load_and_the_steps_are_unchanged(monkeypatch) -> None:
    pytest.importorskip("mujoco_warp")
    from warp._src import context

    from isaac_adapter.tasks.g1_walk.config import clock_fast_config
    from isaac_adapter.tasks.g1_walk.env import make_warp_backend

    ahead = []
    real_compile = compile_recorded

    def remember(seen, workers):
        ahead.extend((id(m), str(d), b) for m, d, b in seen)
        return real_compile(seen, workers)

    import isaac_adapter.backends.mujoco_warp as mujoco_warp_backend

    monkeypatch.setattr(mujoco_warp_backend, "compile_recorded", remember)
    cfg = clock_fast_config(num_envs=4, device="cpu", warp_compile_workers=2)
    backend, nominal, _ = make_warp_backend(cfg, check_every=0)
    plain, _, _ = make_warp_backend(clock_fast_config(num_envs=4, device="cpu"), check_every=0)
    assert backend.compiled_modules == len(set(ahead)) > 20

    loaded = []
    real_load = context.Module.load

    def load(module, device, block_dim=None, *args, **kwargs):
        loaded.append((id(module), str(context.runtime.get_device(device)), block_dim))
        return real_load(module, device, block_dim, *args, **kwargs)

    target = nominal[7:].expand(4, -1).contiguous()
    monkeypatch.setattr(context.Module, "load", load)
    for k in range(3):
        backend.step(target + 0.05 * k)
    backend.reset_envs(torch.tensor([1, 3]), nominal.expand(2, -1).contiguous(), torch.zeros(2, 35))
    backend.step(target)
    monkeypatch.undo()
    assert loaded and set(loaded) <= set(ahead)  # every launch found its module compiled ahead
    for k in range(3):
        plain.step(target + 0.05 * k)
    plain.reset_envs(torch.tensor([1, 3]), nominal.expand(2, -1).contiguous(), torch.zeros(2, 35))
    plain.step(target)
    for name in ("root_pos_w", "root_quat_w", "joint_pos", "joint_vel", "foot_contact"):
        assert torch.equal(getattr(backend.state(), name), getattr(plain.state(), name)), name


_IN_PROCESSES = """
import json, torch
from isaac_adapter.backends.warp_stream import forward_only_kernels
from isaac_adapter.tasks.g1_walk.config import clock_fast_config
from isaac_adapter.tasks.g1_walk.env import make_warp_backend
forward_only_kernels()
cfg = clock_fast_config(num_envs=4, device="cpu", warp_compile_workers=3, warp_compile_via="processes")
backend, nominal, _ = make_warp_backend(cfg, check_every=0)
print("BUILT", flush=True)
plain, _, _ = make_warp_backend(clock_fast_config(num_envs=4, device="cpu"), check_every=0)
target = nominal[7:].expand(4, -1).contiguous()
for b in (backend, plain):
    for k in range(3):
        b.step(target + 0.05 * k)
equal = all(torch.equal(getattr(backend.state(), n), getattr(plain.state(), n))
            for n in ("root_pos_w", "root_quat_w", "joint_pos", "joint_vel", "foot_contact"))
print("RESULT " + json.dumps({"misses": backend.compile_misses, "compiled": backend.compiled_modules,
                              "in_workers": backend.compiled_in_workers, "equal": equal}))
"""


def test_modules_compiled_in_worker_processes_are_read_from_the_cache_and_change_no_step(tmp_path) -> None:
    """From an empty kernel cache, with two workers: this process compiles the modules it claimed
    and reads the workers' from the cache they wrote (Warp's load lines say which), each module
    compiled once, and the steps equal those of a backend that compiled nothing ahead."""
    pytest.importorskip("mujoco_warp")
    import json
    import os
    import subprocess
    import sys

    from isaac_adapter.app.bench.warp_compile import split_loads

    env = {**os.environ, "WARP_CACHE_PATH": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", _IN_PROCESSES], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    built, after = done.stdout.split("BUILT", 1)
    result = json.loads(next(line for line in after.splitlines() if line.startswith("RESULT "))[7:])
    loads = split_loads(built)
    assert result["misses"] == [] and result["equal"]
    here = result["compiled"] - result["in_workers"]
    assert loads["named_n"] + loads["per_model_n"] == here > 0  # compiled here: what this process claimed
    assert loads["cached_n"] == result["in_workers"] > 0  # the workers', from the cache
    assert "compile worker" not in done.stderr


def test_modules_a_failed_worker_claimed_are_named_as_misses_and_compile_here(monkeypatch, capsys) -> None:
    """A worker that claims two modules and exits 1 without compiling them is named in one line; the
    two are its backend's compile misses, compiled here, and every other module was claimed here."""
    pytest.importorskip("mujoco_warp")
    from isaac_adapter.backends import compile_worker, mujoco_warp
    from isaac_adapter.backends.warp_stream import variant_names
    from isaac_adapter.tasks.g1_walk.config import clock_fast_config
    from isaac_adapter.tasks.g1_walk.env import make_warp_backend

    plain, nominal, _ = make_warp_backend(clock_fast_config(num_envs=4, device="cpu"), check_every=0)
    names = variant_names(plain.recorded_launches())
    claimed = [names[0], names[-1]]

    def start_one_that_claims_and_fails(*args, **kwargs):
        workers = compile_worker.start_compile_processes(*args, **kwargs)
        for name in claimed:  # as the worker would have, before this process walks
            compile_worker.claim_file(workers.folder, name).touch()
        return workers

    monkeypatch.setattr(compile_worker.sys, "executable", "false")  # exits 1 at once, saying nothing
    monkeypatch.setattr(mujoco_warp, "start_compile_processes", start_one_that_claims_and_fails)
    cfg = clock_fast_config(num_envs=4, device="cpu", warp_compile_workers=2, warp_compile_via="processes")
    backend, _, _ = make_warp_backend(cfg, check_every=0)
    monkeypatch.undo()
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["warning: Warp compile worker 1 of 1 exited with 1 (no output); its modules compile in this process"]
    assert backend.compile_misses == claimed and backend.compiled_in_workers == 0
    assert backend.compiled_modules == len(names)
    backend.step(nominal[7:].expand(4, -1).contiguous())
    assert torch.isfinite(backend.state().joint_pos).all()


def test_a_compile_worker_starts_without_torch() -> None:
    """What a worker imports (its own module, the device programs, the compile helpers) needs no
    torch, whose import is the largest part of a worker's start on a GPU machine."""
    pytest.importorskip("mujoco_warp")
    import subprocess
    import sys

    probe = ("import sys; import isaac_adapter.backends.compile_worker, isaac_adapter.backends.mujoco_warp_programs, "
             "isaac_adapter.backends.warp_stream; print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch'))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"

