"""Recurrent policies: memory resets on every done, V(s_final) uses the pre-reset state."""

import pytest
import torch

from ppo_bootstrap import PolicyConfig, PPOConfig, Runner, RunnerConfig
from scripted_env import ScriptedEnv

GAMMA = 0.9
ENDS = {(1, 1): (False, True), (2, 2): (True, False)}


def make_runner(kind: str, dense: bool = False) -> Runner:
    cfg = RunnerConfig(
        num_steps_per_env=4, console=False,
        ppo=PPOConfig(gamma=GAMMA, lam=0.0, normalize_advantage=False, num_mini_batches=3),
        policy=PolicyConfig(actor_hidden=(8,), critic_hidden=(8,), recurrent=kind, rnn_hidden=6, obs_normalization=False),
    )
    return Runner(ScriptedEnv(3, ENDS, dense=dense), cfg)


def manual_critic(runner: Runner, xs: list[float], state=None):
    """Run the critic over scalar observations from ``state`` (zeros if None); return (values, state)."""
    policy = runner.policy
    state = policy.initial_state(1, torch.device("cpu"))[1] if state is None else state
    values = []
    for x in xs:
        v, state = policy.value(torch.tensor([[x]]), state)
        values.append(v.item())
    return values, state


@pytest.mark.parametrize("dense", [False, True], ids=["sparse", "dense"])
@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_final_value_uses_pre_reset_state_and_memory_restarts(kind, dense):
    runner = make_runner(kind, dense)
    with torch.no_grad():
        runner._collect()
        runner.alg.compute_returns(runner.obs)
    data = runner.alg.storage.data
    terminal = runner.alg.storage.terminal

    # env 1: obs 2, 3 then timeout (final obs 111) -> reset to 51, 52.
    with torch.no_grad():
        (v0, v1), h1 = manual_critic(runner, [2.0, 3.0])
        (v_final,), _ = manual_critic(runner, [111.0], state=h1)
        (v_fresh,), _ = manual_critic(runner, [51.0])  # a new episode starts from zero memory
        (v_carried,), _ = manual_critic(runner, [51.0], state=h1)
    torch.testing.assert_close(data["values"][:2, 1], torch.tensor([v0, v1]))
    torch.testing.assert_close(terminal.critic_state[:, 0], h1[:, 0])
    assert data["returns"][1, 1].item() == pytest.approx(1 + GAMMA * v_final, rel=1e-5)
    assert data["values"][2, 1].item() == pytest.approx(v_fresh, rel=1e-5)
    assert v_fresh != pytest.approx(v_carried, rel=1e-3)  # the check above could fail


@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_training_sequences_reproduce_collection_without_crossing_episode_ends(kind):
    runner = make_runner(kind)
    with torch.no_grad():
        runner._collect()
        runner.alg.compute_returns(runner.obs)
    storage = runner.alg.storage
    data = storage.data
    starts = storage.episode_starts()
    assert starts[2, 1] and starts[3, 2] and starts.sum() == 2
    with torch.no_grad():
        dist, values = runner.policy.evaluate(data["obs", "policy"], data["obs", "policy"], storage.initial_states, starts)
    torch.testing.assert_close(values, data["values"])
    torch.testing.assert_close(dist.mean, data["action_mean"])
    batches = list(storage.mini_batches(3, torch.Generator().manual_seed(0)))
    assert len(batches) == 3 and all(b.batch_size == torch.Size([4, 1]) for b, _, _ in batches)


def test_recurrent_training_runs_and_changes_parameters():
    runner = make_runner("gru")
    before = [p.detach().clone() for p in runner.policy.parameters()]
    runner.learn(2)
    assert any(not torch.equal(a, b) for a, b in zip(before, runner.policy.parameters()))
