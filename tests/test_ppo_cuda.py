"""The CUDA-graph learner equals the eager one (skipped without a GPU)."""

import copy

import pytest
import torch

from ppo_bootstrap import PPO, ActorCritic, PolicyConfig, PPOConfig, RolloutStorage, Runner, RunnerConfig
from ppo_bootstrap.envs import TimeLimitEnv
from ppo_bootstrap.symmetry import SignPermutation, Symmetry

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def filled_storage(T=24, N=512, seed=0):
    g = torch.Generator().manual_seed(seed)
    storage = RolloutStorage(T, N, {"policy": (12,), "critic": (15,)}, 4, "cuda")
    for key in ("actions", "action_mean", "log_probs", "values", "rewards", "advantages", "returns"):
        storage.data[key].copy_(torch.randn(storage.data[key].shape, generator=g))
    storage.data["action_std"].copy_(torch.rand(T, N, 4, generator=g) + 0.5)
    for group, d in (("policy", 12), ("critic", 15)):
        storage.data["obs", group].copy_(torch.randn(T, N, d, generator=g))
    storage.start((None, None))
    return storage


@pytest.mark.parametrize("bf16_update", [False, True])
def test_graphed_update_equals_eager_update(bf16_update):
    """Also with the hidden layers in bfloat16: the recorded update replays the weights' casts."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    base = ActorCritic(12, 15, 4, PolicyConfig(actor_hidden=(64, 64), critic_hidden=(64, 64))).cuda()
    results = []
    for graph in (False, True):
        policy = copy.deepcopy(base)
        ppo = PPO(policy, PPOConfig(cuda_graph=graph, desired_kl=0.003, bf16_update=bf16_update), "cuda")
        ppo.storage = filled_storage()
        stats = [ppo.update(torch.Generator().manual_seed(1)) for _ in range(3)]
        results.append((policy, stats, ppo.learning_rate))
    (eager, eager_stats, eager_lr), (graphed, graph_stats, graph_lr) = results
    for (name, a), b in zip(eager.named_parameters(), graphed.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=name)
    for a, b in zip(eager_stats, graph_stats):
        assert a.keys() == b.keys()
        for key in a:
            assert a[key] == pytest.approx(b[key], rel=1e-3, abs=1e-5), key
    assert eager_lr == pytest.approx(graph_lr, rel=1e-5)


def test_runner_trains_on_cuda_with_graphs():
    env = TimeLimitEnv(num_envs=256, episode_length=50, privileged_dim=3, fall_probability=0.01, device="cuda")
    runner = Runner(env, RunnerConfig(num_steps_per_env=16, console=False,
                                      policy=PolicyConfig(actor_hidden=(64,), critic_hidden=(64,))))
    runner.learn(3)
    assert runner.alg._graph is not None
    assert all(torch.isfinite(p).all() for p in runner.policy.parameters())


def test_the_epochs_orders_are_drawn_on_the_gpu_without_a_host_sync():
    """The orders are drawn on the device from seeds of the CPU generator: no host sync (a copy from
    pageable memory would wait for every queued replay), the same orders for the same seed, and one
    call for five epochs gives the five orders of five one-epoch calls (graphed and eager updates
    see the same batches)."""
    storage = filled_storage()
    n = 24 * 512
    torch.cuda.set_sync_debug_mode("error")
    try:
        orders, size = storage.permutations(5, 4, torch.Generator().manual_seed(0))
        with pytest.raises(RuntimeError, match="synchroniz"):
            torch.randperm(n).to("cuda")  # the pageable copy, for contrast
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert orders.device.type == "cuda" and orders.shape == (5, n) and size == n // 4
    assert all(torch.equal(order.sort().values.cpu(), torch.arange(n)) for order in orders)
    assert len({tuple(order.tolist()) for order in orders}) == 5
    again, _ = storage.permutations(5, 4, torch.Generator().manual_seed(0))
    one_by_one = torch.Generator().manual_seed(0)
    singles = torch.stack([storage.permutation(4, one_by_one)[0] for _ in range(5)])
    torch.testing.assert_close(again, orders, rtol=0, atol=0)
    torch.testing.assert_close(singles, orders, rtol=0, atol=0)
    other, _ = storage.permutations(5, 4, torch.Generator().manual_seed(1))
    assert not torch.equal(other, orders)


def test_an_update_and_its_normalizers_queue_without_a_host_sync():
    """What ``overlap_update`` launches in its second stream, the update and the normalizers' merge,
    queues without a host sync: one would hold the host until the update ends, and the next rollout
    could not be collected beside it. The losses come back when read."""
    policy = ActorCritic(12, 15, 4, PolicyConfig(actor_hidden=(64, 64), critic_hidden=(64, 64),
                                                 obs_normalization=True)).cuda()
    swap = SignPermutation([1, 0, 3, 2], [1.0, 1.0, -1.0, -1.0])  # as the G1's joints: pairs, some negated
    mirror = Symmetry({"policy": SignPermutation.concat(swap, swap, swap),
                       "critic": SignPermutation.concat(swap, swap, swap, SignPermutation.identity(3))}, swap)
    ppo = PPO(policy, PPOConfig(desired_kl=0.01, symmetry_augmentation=True, symmetry_loss_coef=0.5), "cuda",
              symmetry=mirror)
    ppo.storage = filled_storage()
    ppo.update(torch.Generator().manual_seed(0))  # records the graph, which may synchronise once
    count = float(policy.actor.normalizer.count)
    torch.cuda.set_sync_debug_mode("error")
    try:
        losses = ppo.launch_update(torch.Generator().manual_seed(1))
        ppo.update_normalizers()
        with pytest.raises(RuntimeError, match="synchroniz"):
            torch.tensor(1.0, device="cuda")  # a scalar copied from the host, for contrast
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert losses.shape == (5 * 4, 5) and bool(torch.isfinite(losses).all())
    assert float(policy.actor.normalizer.count) == count + 2 * 24 * 512  # the rollout and its mirror image
