"""The pieces of ``benchmarks/rsl_rl_learning.py`` that need neither rsl-rl-lib nor Gymnasium: the
env-side episode meter, the agent config both trainers take, and the table, on hand-worked values."""

from __future__ import annotations

import math

import pytest
import torch

from ppo_bootstrap import RunnerConfig

from isaac_adapter.app.bench.common import EpisodeMeter, last_mean
from isaac_adapter.app.bench.rsl_rl_learning import agent_config, learning_table


def test_the_meter_counts_each_ended_episode_once_and_a_fall_on_the_last_step_as_a_fall() -> None:
    meter = EpisodeMeter(3, "cpu")
    f, t = False, True
    steps = [  # rewards, done, time-out (read only where done)
        ([1.0, 2.0, 3.0], [f, f, f], [f, f, f]),
        ([1.0, 2.0, 3.0], [t, f, t], [t, f, t]),   # env 0 by the time limit (2, 2 steps); env 2 too (6, 2)
        ([5.0, 2.0, 1.0], [f, t, t], [t, f, f]),   # env 1 falls (6, 3 steps); env 2 falls after 1 (1, 1); env 0's flag unread
    ]
    for reward, done, time_out in steps:
        meter.add(torch.tensor(reward), torch.tensor(done), torch.tensor(time_out))
    ret, length, ended, timeouts = meter.take()
    assert (ended, timeouts) == (4, 2)
    assert ret == pytest.approx((2 + 6 + 6 + 1) / 4) and length == pytest.approx((2 + 2 + 3 + 1) / 4)
    meter.add(torch.tensor([1.0, 1.0, 1.0]), torch.tensor([t, f, f]), torch.tensor([f, f, f]))
    assert meter.take() == (6.0, 2.0, 1, 0)  # env 0's second episode: 5 + 1 over 2 steps; a fall
    assert meter.take()[2:] == (0, 0) and math.isnan(meter.take()[0])


def test_the_agent_config_is_one_runner_config_takes_field_by_field() -> None:
    cfg = RunnerConfig.from_rsl_rl(agent_config(seed=3, steps=32, iterations=400))
    assert (cfg.seed, cfg.num_steps_per_env, cfg.max_iterations) == (3, 32, 400)
    assert cfg.policy.actor_hidden == cfg.policy.critic_hidden == (64, 64) and not cfg.policy.obs_normalization
    assert (cfg.ppo.learning_rate, cfg.ppo.schedule, cfg.ppo.desired_kl, cfg.ppo.entropy_coef) == (3e-4, "adaptive", 0.01, 0.0)
    assert (cfg.ppo.num_learning_epochs, cfg.ppo.num_mini_batches, cfg.ppo.timeout_bootstrap) == (5, 4, "exact")


def rows(returns: list[float | None]) -> list[dict]:
    """An iteration per value (None: no episode ended in it), 2 episodes ended per iteration otherwise."""
    return [{"it": i + 1, "wall_s": 0.5 if i else 9.0, "return": math.nan if r is None else r, "length": 10.0,
             "ended": 0 if r is None else 2, "timeouts": 0 if r is None else 1} for i, r in enumerate(returns)]


def test_the_return_a_run_ends_at_and_the_table_over_seeds() -> None:
    assert last_mean(rows([100, 1, 2, None, 3]), "return", 3) == 2.5  # the last 3 iterations, the one without an end left out
    assert math.isnan(last_mean(rows([None, None]), "return", 2))
    rec = lambda trainer, seed, rs: {"trainer": trainer, "seed": seed, "env": "Hopper-v5", "num_envs": 64,  # noqa: E731
                                     "steps": 32, "iterations": len(rs), "rows": rows(rs)}
    records = [rec("rsl_rl", 1, [0, 30, 50]), rec("rsl_rl", 0, [0, 10, 20]),
               rec("ppo_bootstrap/exact", 0, [0, 40, 40]), rec("ppo_bootstrap/exact", 1, [0, 20, 60])]
    lines = learning_table(records, window=2).splitlines()
    # rsl_rl ends at 15 (seed 0) and 40 (seed 1): mean 27.5, std sqrt(312.5) = 17.7; 6 episodes per run, 3 by time;
    # these rows keep no learning rate (as older records): "-"
    assert "| ppo_bootstrap/exact | 0, 1 | 40, 40 | 40 | 0 | 12 | 6 | - | 0.500 |" in lines
    assert "| rsl_rl | 0, 1 | 15, 40 | 28 | 18 | 12 | 6 | - | 0.500 |" in lines
    # 40 - 27.5 = +12.5 (printed +12: halves round to even); standard error sqrt(0 / 2 + 312.5 / 2) = 12.5; t = +1
    assert lines[-1] == "ppo_bootstrap/exact - rsl_rl: +12, standard error 12, t = +1.00"
    assert lines[0].startswith("Hopper-v5, 64 envs x 32 steps, 3 iterations;")  # older records name no time limit
    limited = [{**r, "time_limit": 200} for r in records]
    assert learning_table(limited, window=2).startswith("Hopper-v5, time limit 200 steps, 64 envs x 32 steps")
    # a third trainer: each is compared with rsl-rl-lib; the learning rate is the geometric mean over every row of its
    # runs: (1 x 2 x 4 x 3 x 5 x 6)^(1/6) = 720^(1/6) = 2.994 (x 1e-3)
    probe = [rec("ppo_bootstrap/exact, shuffled once", seed, [0, 30, 30 + 20 * seed]) for seed in (0, 1)]
    for r, rates in zip(probe, ([1e-3, 2e-3, 4e-3], [3e-3, 5e-3, 6e-3])):
        for row, lr in zip(r["rows"], rates):
            row["lr"] = lr
    lines = learning_table(records + probe, window=2).splitlines()
    # the probe ends at 30 and 40: mean 35, std sqrt(50); 35 - 27.5 = 7.5, standard error sqrt(50/2 + 312.5/2) = 13.5
    assert "| ppo_bootstrap/exact, shuffled once | 0, 1 | 30, 40 | 35 | 7 | 12 | 6 | 2.99e-03 | 0.500 |" in lines
    assert lines[-2:] == ["ppo_bootstrap/exact - rsl_rl: +12, standard error 12, t = +1.00",
                          "ppo_bootstrap/exact, shuffled once - rsl_rl: +8, standard error 13, t = +0.56"]


def _learner(epochs: int, learning_rate: float):
    """A small learner whose rollout was collected by its own policy (random observations and actions)."""
    from ppo_bootstrap import PPO, ActorCritic, PolicyConfig, PPOConfig, RolloutStorage

    torch.manual_seed(0)
    policy = ActorCritic(5, 5, 3, PolicyConfig(actor_hidden=(16,), critic_hidden=(16,)))
    learner = PPO(policy, PPOConfig(num_learning_epochs=epochs, num_mini_batches=4, learning_rate=learning_rate))
    learner.storage = RolloutStorage(8, 16, {"policy": (5,)}, 3, "cpu")
    data = learner.storage.data
    g = torch.Generator().manual_seed(1)
    data["obs", "policy"].copy_(torch.randn(8, 16, 5, generator=g))
    with torch.no_grad():
        dist, values = policy.evaluate(data["obs", "policy"], data["obs", "policy"], (None, None), None)
        data["action_mean"].copy_(dist.mean)
        data["action_std"].copy_(dist.stddev)
        data["actions"].copy_(dist.mean + dist.stddev * torch.randn(8, 16, 3, generator=g))
        data["log_probs"].copy_(dist.log_prob(data["actions"]).sum(-1))
        data["values"].copy_(values.reshape(8, 16))
    for key in ("advantages", "returns"):
        data[key].copy_(torch.randn(8, 16, generator=g))
    return learner


def test_what_an_update_reads_and_moves_under_each_order() -> None:
    from isaac_adapter.app.bench.rsl_rl_learning import moved_kl, read_and_moved

    learner = _learner(epochs=3, learning_rate=1e-3)
    before = [p.clone() for p in learner.policy.parameters()]
    assert moved_kl(learner) == pytest.approx(0.0, abs=1e-6)  # the rollout's own policy has not moved
    measured = read_and_moved(learner, seed=5)
    assert all(torch.equal(a, b) for a, b in zip(before, learner.policy.parameters()))  # copies updated, not it
    assert measured["every_epoch"] != measured["once"]  # three epochs: other orders, other steps
    assert all(read > 0 and moved > 0 for read, moved in measured.values())
    # one epoch: "once" keeps the very order "every_epoch" draws first, so the two updates are one
    one = read_and_moved(_learner(epochs=1, learning_rate=1e-3), seed=5)
    assert one["every_epoch"] == one["once"]
    # a learning rate of 0 moves nothing, and the schedule reads no KL
    still = read_and_moved(_learner(epochs=3, learning_rate=0.0), seed=5)
    assert all(read == pytest.approx(0.0, abs=1e-6) and moved == pytest.approx(0.0, abs=1e-6)
               for read, moved in still.values())
