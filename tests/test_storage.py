"""Storage memory and observation normalization."""

import pytest
import torch

from ppo_bootstrap import PolicyConfig, Runner, RunnerConfig, RolloutStorage, StepResult
from ppo_bootstrap.storage import Transition
from ppo_bootstrap.envs import TimeLimitEnv
from ppo_bootstrap.modules import EmpiricalNormalization


def test_terminal_observations_do_not_double_observation_memory():
    T, N, D = 24, 4096, 48
    storage = RolloutStorage(T, N, {"policy": (D,), "critic": (D + 12,)}, 12, "cpu")
    storage.start((None, None))
    g = torch.Generator().manual_seed(0)
    zeros = torch.zeros(N, 12)
    for t in range(T):
        ended = torch.nonzero(torch.rand(N, generator=g) < 0.002).flatten()  # ~1 end per 500 env steps
        terminated = torch.zeros(N, dtype=torch.bool)
        terminated[ended] = True
        obs = {"policy": torch.randn(N, D), "critic": torch.randn(N, D + 12)}
        final = {k: v[ended] + 1 for k, v in obs.items()}
        storage.add(
            Transition(obs, zeros, zeros, zeros, zeros[:, 0], zeros[:, 0]),
            StepResult(obs, zeros[:, 0], terminated, torch.zeros(N, dtype=torch.bool), final, ended),
        )
    terminal = storage.finish()
    obs_bytes = sum(v.numel() * v.element_size() for v in storage.data["obs"].values())
    terminal_bytes = sum(v.numel() * v.element_size() for v in terminal.obs.values())
    assert terminal.num_rows == int(storage.data["terminated"].sum())
    assert terminal_bytes < 0.01 * obs_bytes
    assert storage.data["obs", "policy"].shape == (T, N, D)


def test_normalizer_moments_equal_those_of_the_union():
    g = torch.Generator().manual_seed(1)
    batches = [torch.randn(n, 5, generator=g, dtype=torch.float64) * 3 + 7 for n in (1, 17, 256, 3)]
    norm = EmpiricalNormalization(5)
    for b in batches:
        norm.update(b)
    union = torch.cat(batches)
    torch.testing.assert_close(norm.mean, union.mean(0))
    torch.testing.assert_close(norm.m2 / norm.count, union.var(0, unbiased=False))
    x = torch.randn(4, 5, dtype=torch.float64)
    expected = (x - union.mean(0)) / (union.std(0, unbiased=False) + norm.eps)
    torch.testing.assert_close(norm(x.float()), expected.float())


def test_normalizer_frozen_in_eval_mode():
    norm = EmpiricalNormalization(2).eval()
    norm.update(torch.ones(4, 2))
    assert norm.count.item() == 0


@pytest.mark.parametrize("std_type", ["scalar", "log", "state_dependent"])
def test_std_types_start_at_init_noise_std_and_train(std_type):
    env = TimeLimitEnv(num_envs=8, episode_length=10)
    cfg = RunnerConfig(num_steps_per_env=8, console=False,
                       policy=PolicyConfig(actor_hidden=(8,), critic_hidden=(8,), std_type=std_type, init_noise_std=0.7))
    runner = Runner(env, cfg)
    with torch.no_grad():
        dist, _ = runner.policy.act(torch.randn(3, 4), None)
    torch.testing.assert_close(dist.stddev, torch.full((3, 2), 0.7))
    runner.learn(1)
    assert runner.alg.storage.data["action_std"].gt(0).all()


@pytest.mark.parametrize(
    "kl,expected",
    [(0.05, 1e-3 / 1.5), (0.004, 1.5e-3), (0.01, 1e-3), (0.0, 1e-3), (0.021, 1e-3 / 1.5), (0.0049, 1.5e-3)],
)
def test_adaptive_learning_rate_follows_kl(kl, expected):
    from ppo_bootstrap import ActorCritic, PPO, PPOConfig

    ppo = PPO(ActorCritic(3, 3, 2, PolicyConfig(actor_hidden=(4,), critic_hidden=(4,))), PPOConfig(desired_kl=0.01))
    ppo._adapt_learning_rate(torch.tensor(kl))
    assert ppo.learning_rate == pytest.approx(expected, rel=1e-6)
    assert ppo.optimizer.param_groups[0]["lr"] == pytest.approx(expected, rel=1e-6)


def test_adaptive_learning_rate_is_clamped():
    from ppo_bootstrap import ActorCritic, PPO, PPOConfig

    ppo = PPO(ActorCritic(3, 3, 2, PolicyConfig(actor_hidden=(4,), critic_hidden=(4,))),
              PPOConfig(learning_rate=1e-2, max_learning_rate=1e-2, min_learning_rate=5e-3))
    ppo._adapt_learning_rate(torch.tensor(1e-4))
    assert ppo.learning_rate == pytest.approx(1e-2)
    for _ in range(5):
        ppo._adapt_learning_rate(torch.tensor(1.0))
    assert ppo.learning_rate == pytest.approx(5e-3)
