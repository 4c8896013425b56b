"""Value targets through the real collection path: Runner -> storage -> PPO.compute_returns."""

import pytest
import torch

from ppo_bootstrap import PolicyConfig, PPOConfig, Runner, RunnerConfig
from scripted_env import ScriptedEnv

GAMMA = 0.9


def identity_critic_runner(env, timeout_bootstrap="exact", privileged=False, steps=4) -> Runner:
    """A Runner whose critic is V(obs) = obs[0] (linear, no normalization), lam = 0: returns = one-step targets."""
    cfg = RunnerConfig(
        num_steps_per_env=steps, console=False, validate_env_output=True,
        ppo=PPOConfig(gamma=GAMMA, lam=0.0, normalize_advantage=False, timeout_bootstrap=timeout_bootstrap),
        policy=PolicyConfig(actor_hidden=(8,), critic_hidden=(), obs_normalization=False),
    )
    runner = Runner(env, cfg)
    lin = runner.policy.critic.head[-1]
    with torch.no_grad():
        lin.weight.zero_()
        lin.weight[0, 0] = 1.0
        lin.bias.zero_()
    return runner


def targets(runner: Runner) -> torch.Tensor:
    runner._collect()
    runner.alg.compute_returns(runner.obs)
    return runner.alg.storage.data["returns"]


# env 0 runs on; env 1 times out at t=1; env 2 falls at t=2; env 3 falls and times out together at t=1.
ENDS = {(1, 1): (False, True), (2, 2): (True, False), (1, 3): (True, True)}


@pytest.mark.parametrize("dense", [False, True], ids=["sparse", "dense"])
@pytest.mark.parametrize("privileged", [False, True])
def test_truncation_bootstraps_from_true_final_observation(privileged, dense):
    env = ScriptedEnv(4, ENDS, privileged=privileged, dense=dense)
    ret = targets(identity_critic_runner(env, privileged=privileged))
    # env 1: obs 2, 3, then final obs 100 + 10 + 1 = 111 (reset to 51), then 52, 53.
    assert ret[1, 1].item() == pytest.approx(1 + GAMMA * 111)
    assert ret[1, 1].item() != pytest.approx(1 + GAMMA * 3)  # rsl_rl: V(s_t)
    assert ret[1, 1].item() != pytest.approx(1 + GAMMA * 51)  # post-reset obs
    assert ret[0, 1].item() == pytest.approx(1 + GAMMA * 3)
    assert ret[2, 1].item() == pytest.approx(1 + GAMMA * 52)  # new episode bootstraps normally
    # env 0 never ends: obs 1..5, last target bootstraps from the last obs.
    torch.testing.assert_close(ret[:, 0], torch.tensor([1 + GAMMA * k for k in (2.0, 3.0, 4.0, 5.0)]))


@pytest.mark.parametrize("dense", [False, True], ids=["sparse", "dense"])
def test_termination_and_both_flags_do_not_bootstrap(dense):
    ret = targets(identity_critic_runner(ScriptedEnv(4, ENDS, dense=dense)))
    assert ret[2, 2].item() == pytest.approx(1.0)
    assert ret[1, 3].item() == pytest.approx(1.0)  # terminated wins over truncated


@pytest.mark.parametrize("dense", [False, True], ids=["sparse", "dense"])
def test_rsl_rl_and_ignore_truncation_baselines(dense):
    approx = targets(identity_critic_runner(ScriptedEnv(4, ENDS, dense=dense), "state_value"))
    assert approx[1, 1].item() == pytest.approx(1 + GAMMA * 3)  # V(s_t), obs at t=1 is 3
    ignore = targets(identity_critic_runner(ScriptedEnv(4, ENDS, dense=dense), "none"))
    assert ignore[1, 1].item() == pytest.approx(1.0)


@pytest.mark.parametrize("dense", [False, True], ids=["sparse", "dense"])
def test_terminal_rows_are_compact_and_statistics_count_causes(dense):
    runner = identity_critic_runner(ScriptedEnv(4, ENDS, dense=dense))
    runner._collect()
    stats = runner.alg.compute_returns(runner.obs)
    terminal = runner.alg.storage.terminal
    assert terminal.num_rows == 3
    assert terminal.step.tolist() == [1, 1, 2] and terminal.env_id.tolist() == [1, 3, 2]
    assert terminal.obs["policy"].flatten().tolist() == [111.0, 131.0, 122.0]
    assert stats["episodes/terminated"] == 2 and stats["episodes/truncated_only"] == 1
    assert stats["timeout_bootstrap/mean"] == pytest.approx(GAMMA * 111)


def test_final_observation_is_normalized_like_every_other_observation():
    env = ScriptedEnv(4, ENDS)
    cfg = RunnerConfig(num_steps_per_env=4, console=False, ppo=PPOConfig(gamma=GAMMA, lam=0.0, normalize_advantage=False),
                       policy=PolicyConfig(actor_hidden=(8,), critic_hidden=(), obs_normalization=True))
    runner = Runner(env, cfg)
    runner.learn(1)  # the normalizer moves after each iteration
    env.reset()
    runner.obs = env.reset()
    runner._collect()
    runner.alg.compute_returns(runner.obs)
    norm = runner.policy.critic.normalizer
    lin = runner.policy.critic.head[-1]
    v_final = lin(norm(torch.tensor([[111.0]]))).item()
    assert runner.alg.storage.data["returns"][1, 1].item() == pytest.approx(1 + GAMMA * v_final, rel=1e-5)
    assert v_final != pytest.approx(lin(torch.tensor([[111.0]])).item())  # normalization did apply
