"""Two processes over gloo on CPU: identical parameters, global normalizer and advantage statistics."""

import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from ppo_bootstrap import PolicyConfig, PPOConfig, Runner, RunnerConfig
from ppo_bootstrap.envs import TimeLimitEnv
from ppo_bootstrap.modules import EmpiricalNormalization
from ppo_bootstrap.distributed import global_moments
from ppo_bootstrap.ppo import normalize_global

WORLD = 2


def rank_data(rank: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(100 + rank)
    return torch.randn(50 + 30 * rank, 3, generator=g) * (rank + 1) + 4 * rank  # ranks see different data


def make_runner(seed_env: int) -> Runner:
    env = TimeLimitEnv(num_envs=8, episode_length=12, privileged_dim=1, fall_probability=0.05, seed=seed_env)
    cfg = RunnerConfig(num_steps_per_env=8, console=False, seed=5,
                       ppo=PPOConfig(num_mini_batches=2, num_learning_epochs=2),
                       policy=PolicyConfig(actor_hidden=(16,), critic_hidden=(16,)))
    return Runner(env, cfg)


def _worker(rank: int, port: int, out_dir: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        norm = EmpiricalNormalization(3)
        norm.update(rank_data(rank), global_moments)  # the trainer passes the same reducer
        adv = normalize_global(rank_data(rank)[:, 0].contiguous())

        runner = make_runner(seed_env=rank)
        runner.load(os.path.join(out_dir, "single.pt"))  # saved by one process: resumes under two
        loaded = {k: v.clone() for k, v in runner.policy.state_dict().items()}
        runner.learn(3)
        runner.save(os.path.join(out_dir, "two.pt"))  # rank 0 alone writes
        torch.save({"norm": norm.state_dict(), "adv": adv, "policy": runner.policy.state_dict(),
                    "lr": runner.alg.learning_rate, "obs0": runner.alg.storage.data["obs", "policy"][0, 0].clone(),
                    "loaded": loaded, "iteration": runner.iteration},
                   os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("dist")


@pytest.fixture(scope="module")
def results(out_dir):
    out = out_dir
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    single = make_runner(seed_env=0)
    single.learn(1)
    single.save(out / "single.pt")
    mp.spawn(_worker, args=(port, str(out)), nprocs=WORLD, join=True)
    return [torch.load(out / f"rank{r}.pt", weights_only=False) for r in range(WORLD)]


def test_parameters_identical_across_ranks_after_updates(results):
    a, b = results
    assert not torch.equal(a["obs0"], b["obs0"])  # the ranks really ran different envs
    for key, value in a["policy"].items():
        assert torch.equal(value, b["policy"][key]), key
    assert a["lr"] == b["lr"]


def test_normalizer_statistics_equal_one_process_over_the_union(results):
    union = torch.cat([rank_data(r) for r in range(WORLD)]).double()
    for r in range(WORLD):
        state = results[r]["norm"]
        assert state["count"].item() == union.shape[0]
        torch.testing.assert_close(state["mean"], union.mean(0))
        torch.testing.assert_close(state["m2"], ((union - union.mean(0)) ** 2).sum(0))


def test_advantage_normalization_uses_the_global_batch(results):
    union = torch.cat([rank_data(r)[:, 0] for r in range(WORLD)])
    expected = (union - union.mean()) / (union.std() + 1e-8)
    got = torch.cat([results[r]["adv"] for r in range(WORLD)])
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_checkpoints_move_between_world_sizes(results, out_dir):
    single = torch.load(out_dir / "single.pt", weights_only=False)
    for r in range(WORLD):
        assert all(torch.equal(results[r]["loaded"][k], v) for k, v in single["policy"].items())
        assert results[r]["iteration"] == single["iteration"] + 3
    two = torch.load(out_dir / "two.pt", weights_only=False)
    assert two["world_size"] == WORLD and two["iteration"] == single["iteration"] + 3
    resumed = make_runner(seed_env=0)
    resumed.load(out_dir / "two.pt")  # written under two processes: resumes under one
    assert all(torch.equal(resumed.policy.state_dict()[k], v) for k, v in results[0]["policy"].items())
    resumed.learn(1)
    assert resumed.iteration == two["iteration"] + 1
