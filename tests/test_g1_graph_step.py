"""What recording the G1 env's step in a CUDA graph relies on, checked eagerly on CPU MuJoCo:

* a step run through ``pinned`` (every rebound buffer copied back into the one it had) gives the
  same results, bit for bit, as the plain step, falls and resets included, and leaves every buffer
  at the same object, with no two buffers sharing storage after ``unshare``;
* the reward ramps advanced by the device count (what a graph replays) pay the same as with the
  count written from the host;
* a graph's outputs are copied out whole, each tensor once;
* a CPU env refuses ``cuda_graph`` in one line that says what to do.

The recording and replay themselves need CUDA: ``tests/test_warp_in_torch_graph.py``.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from ppo_bootstrap.env import StepResult

from isaac_adapter.tasks.g1_walk import G1WalkEnv
from isaac_adapter.tasks.g1_walk.config import G1WalkConfig, RewardRamp, gait_clock_config
from isaac_adapter.tasks.g1_walk.graph_step import _buffers, _Outputs, _tensors, pinned, unshare

N = 6


def _env(**overrides) -> G1WalkEnv:
    cfg = gait_clock_config(num_envs=N, seed=5, physics_threads=1, **overrides)
    env = G1WalkEnv(cfg)
    env.reset(seed=5)
    return env


def _assert_same(a: StepResult, b: StepResult, step: int) -> None:
    for group in a.obs:
        assert torch.equal(a.obs[group], b.obs[group]), (step, group)
        assert torch.equal(a.final_obs_all[group], b.final_obs_all[group]), (step, group)
    for name in ("reward", "terminated", "truncated"):
        assert torch.equal(getattr(a, name), getattr(b, name)), (step, name)
    assert torch.equal(a.info["termination_cause"], b.info["termination_cause"]), step
    assert a.info["log"].keys() == b.info["log"].keys()
    for key, value in a.info["log"].items():
        assert torch.equal(torch.as_tensor(value), torch.as_tensor(b.info["log"][key])), (step, key)


def test_a_pinned_step_is_the_plain_step_and_keeps_every_buffer_in_place() -> None:
    ramps = (RewardRamp("action_rate", -0.2, start_step=3, end_step=30),)
    plain, kept = _env(reward_ramps=ramps), _env(reward_ramps=ramps)
    unshare(kept)
    storages = [t.untyped_storage().data_ptr() for v in _buffers(kept).values() for t in _tensors(v)]
    assert len(storages) == len(set(storages))  # no two buffers share storage
    gen = torch.Generator().manual_seed(0)
    ended = 0
    for step in range(1, 61):
        actions = 1.5 * torch.randn(N, plain.num_actions, generator=gen)  # strong enough to topple some
        before = _buffers(kept)
        kept.common_step_counter += 1  # as G1WalkEnv.step, around the body
        result = pinned(kept, lambda: kept._step_body(actions))
        _assert_same(plain.step(actions), result, step)
        after = _buffers(kept)
        assert all(after[k] is v for k, v in before.items()), step
        if step == 1:  # the first step makes the task's per-step buffers; a recording comes after it
            unshare(kept)
        else:
            assert after.keys() == before.keys(), step
        ended += int((result.terminated | result.truncated).sum())
    assert ended > 0  # resets happened inside the compared steps


def test_pinned_names_a_buffer_rebound_to_another_shape() -> None:
    class Holder:
        def __init__(self) -> None:
            self.buffer = torch.zeros(3)

    holder = Holder()

    def body() -> None:
        holder.buffer = torch.zeros(4)

    with pytest.raises(ValueError, match=r"^buffer: a recorded step rebinds it to \(4,\)"):
        pinned(holder, body)


def test_ramps_advanced_on_the_device_pay_what_the_host_count_pays() -> None:
    ramps = (RewardRamp("action_rate", -0.3, start_step=2, end_step=9), RewardRamp("ang_vel_xy", -0.2, 5, 5))
    host, device = _env(reward_ramps=ramps), _env(reward_ramps=ramps)
    zeros = torch.zeros(N, host.num_actions)
    host.step(zeros), device.step(zeros)
    device.reward_step_on_device = True  # from here its count moves by += 1, as a replayed graph's does
    gen = torch.Generator().manual_seed(1)
    for step in range(2, 13):
        actions = 0.3 * torch.randn(N, host.num_actions, generator=gen)
        a, b = host.step(actions), device.step(actions)
        assert torch.equal(a.reward, b.reward), step
        for term in ("action_rate", "ang_vel_xy"):
            expected = host.task_cfg.reward_weights(step)[term]
            assert b.info["log"][f"Curriculum/{term}"].item() == pytest.approx(expected, rel=1e-6), (step, term)
            assert torch.equal(a.info["log"][f"Curriculum/{term}"], b.info["log"][f"Curriculum/{term}"])
    assert device._reward_step.item() == device.common_step_counter == 12


def test_graph_outputs_are_copied_out_whole_and_once() -> None:
    truncated = torch.tensor([False, True])
    result = StepResult(
        obs={"policy": torch.ones(2, 3), "critic": torch.ones(2, 4)}, reward=torch.tensor([1.0, 2.0]),
        terminated=torch.tensor([True, False]), truncated=truncated, final_obs=None, final_env_ids=None,
        info={"time_outs": truncated, "termination_cause": torch.tensor([1, 4]),
              "log": {"a": torch.tensor(0.5), "b": torch.tensor(3, dtype=torch.long)}},
        final_obs_all={"policy": torch.zeros(2, 3), "critic": torch.zeros(2, 4)},
    )
    outputs = _Outputs(result)
    copied = outputs.copy()
    for t in (result.reward, result.obs["policy"], result.final_obs_all["critic"], *(s for *_, s in outputs.logs)):
        t.add_(7)  # the next replay overwrites the graph's tensors
    truncated.logical_not_()
    assert copied.reward.tolist() == [1.0, 2.0] and copied.obs["policy"].eq(1).all()
    assert copied.final_obs_all["critic"].eq(0).all() and copied.truncated.tolist() == [False, True]
    assert copied.info["time_outs"] is copied.truncated  # one copy of one tensor, however often named
    assert {k: v.item() for k, v in copied.info["log"].items()} == {"a": 0.5, "b": 3.0}
    assert copied.info["termination_cause"].tolist() == [1, 4] and copied.final_env_ids is None


def test_isaac_lab_step_outputs_are_copied_out_whole_and_once() -> None:
    # DirectRLEnv.step's (obs, reward, terminated, time_outs, extras), extras holding the dense final
    # observations and the log
    time_outs = torch.tensor([True, False])
    obs = {"policy": torch.ones(2, 3)}
    extras = {"final_obs": {"policy": torch.full((2, 3), 2.0)}, "time_outs": time_outs,
              "log": {"Episode_Termination/height": torch.tensor(1.0), "Curriculum/x": torch.tensor(0.5)}}
    result = (obs, torch.tensor([0.5, -1.0]), torch.tensor([False, True]), time_outs, extras)
    outputs = _Outputs(result)
    copied = outputs.copy()
    for t in (obs["policy"], extras["final_obs"]["policy"], result[1], *(s for *_, s in outputs.logs)):
        t.mul_(0)  # the next replay overwrites the graph's tensors
    time_outs.logical_not_()
    c_obs, c_reward, c_terminated, c_time_outs, c_extras = copied
    assert isinstance(copied, tuple) and c_obs["policy"].eq(1).all() and c_reward.tolist() == [0.5, -1.0]
    assert c_extras["final_obs"]["policy"].eq(2).all() and c_terminated.tolist() == [False, True]
    assert c_extras["time_outs"] is c_time_outs and c_time_outs.tolist() == [True, False]
    assert {k: v.item() for k, v in c_extras["log"].items()} == {"Episode_Termination/height": 1.0, "Curriculum/x": 0.5}
    assert c_extras is not extras and c_obs is not obs


def test_log_numbers_cannot_be_recorded() -> None:
    result = StepResult(obs={}, reward=torch.zeros(1), terminated=torch.zeros(1, dtype=torch.bool),
                        truncated=torch.zeros(1, dtype=torch.bool), final_obs=None, final_env_ids=None,
                        info={"log": {"Curriculum/x": 0.25}})
    with pytest.raises(ValueError, match=r"Curriculum/x"):
        _Outputs(result)
    with pytest.raises(ValueError, match=r"Episode/x"):
        _Outputs(({}, torch.zeros(1), None, None, {"log": {"Episode/x": 3}}))


def test_a_cpu_env_refuses_the_graph_in_one_line() -> None:
    env = G1WalkEnv(dataclasses.replace(G1WalkConfig(), num_envs=2, physics_threads=1))
    env.reset()
    env.cuda_graph = True
    with pytest.raises(ValueError, match=r"^cuda_graph: .* MujocoCpuBackend on cpu; set env.cuda_graph = False$"):
        env.step(torch.zeros(2, env.num_actions))
