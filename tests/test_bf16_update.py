"""``PPOConfig.bf16_update``: the update's hidden layers in bfloat16, everything the losses compare in float32.

Each check is against the same update in float32 (the reference), on CPU (autocast to bfloat16 runs
there too); ``tests/test_ppo_cuda.py`` holds the recorded update to the eager one on a GPU.
"""

import copy

import pytest
import torch
from torch import nn

from ppo_bootstrap import PPO, ActorCritic, PolicyConfig, PPOConfig, RolloutStorage

T, N, P, C, A = 8, 256, 12, 15, 4
BF16_EPS = 2.0**-8  # bfloat16 keeps 8 bits of mantissa


def policy_and_storage(seed=0):
    """A policy and a rollout it took itself: the stored means, stds and log-probs are its own, so at
    the start of an update the float32 ratio is exactly 1 and the KL exactly 0."""
    torch.manual_seed(seed)
    policy = ActorCritic(P, C, A, PolicyConfig(actor_hidden=(64, 64), critic_hidden=(64, 64), init_noise_std=0.3))
    g = torch.Generator().manual_seed(seed)
    storage = RolloutStorage(T, N, {"policy": (P,), "critic": (C,)}, A, "cpu")
    d = storage.data
    d["obs", "policy"].copy_(torch.randn(T, N, P, generator=g))
    d["obs", "critic"].copy_(torch.randn(T, N, C, generator=g))
    with torch.no_grad():
        dist, _ = policy.act(d["obs", "policy"].reshape(-1, P), None)
        actions = dist.mean + dist.stddev * torch.randn(T * N, A, generator=g)
        d["actions"].copy_(actions.reshape(T, N, A))
        d["action_mean"].copy_(dist.mean.reshape(T, N, A))
        d["action_std"].copy_(dist.stddev.reshape(T, N, A))
        d["log_probs"].copy_(dist.log_prob(actions).sum(-1).reshape(T, N))
        d["values"].copy_(policy.value(d["obs", "critic"].reshape(-1, C), None)[0].reshape(T, N))
    d["advantages"].copy_(torch.randn(T, N, generator=g))
    d["returns"].copy_(d["values"] + torch.randn(T, N, generator=g))
    storage.start((None, None))
    return policy, storage


def one_batch(storage):
    batch, _, _ = next(iter(storage.mini_batches(1, torch.Generator().manual_seed(1))))
    return batch


def test_the_update_runs_hidden_layers_in_bfloat16_and_outputs_in_float32():
    policy, storage = policy_and_storage()
    seen: list[tuple[str, torch.dtype]] = []
    for name, module in policy.named_modules():
        if isinstance(module, nn.Linear):
            module.register_forward_hook(lambda m, i, out, name=name: seen.append((name, out.dtype)))
    ppo = PPO(policy, PPOConfig(bf16_update=True))
    _, terms = ppo.loss(one_batch(storage))
    last = {"actor.head.4", "critic.head.4"}  # 64-64 MLPs: Linear, ELU, Linear, ELU, Linear
    assert {name for name, _ in seen} == {"actor.head.0", "actor.head.2", "critic.head.0", "critic.head.2"} | last
    for name, dtype in seen:
        assert dtype == (torch.float32 if name in last else torch.bfloat16), name
    assert all(t.dtype == torch.float32 for t in terms.values())
    seen.clear()
    with torch.no_grad():  # a rollout step is not the update: float32 throughout
        policy.act(storage.data["obs", "policy"][0], None)
    assert seen and all(dtype == torch.float32 for _, dtype in seen)


def test_the_bfloat16_loss_is_the_float32_loss_within_bfloat16s_precision():
    policy, storage = policy_and_storage()
    batch = one_batch(storage)
    ref = {k: float(v.detach()) for k, v in PPO(policy, PPOConfig()).loss(batch)[1].items()}
    low = {k: float(v.detach()) for k, v in PPO(policy, PPOConfig(bf16_update=True)).loss(batch)[1].items()}
    assert ref["kl"] == 0.0  # the float32 reference: the policy's own rollout
    # hidden activations rounded to 8 bits move each output by a fraction of eps of its size (errors
    # of random sign over 64 inputs); the KL (0 in float32) stays far below the schedule's targets
    # (0.01-0.02), and the losses agree to a small fraction of eps
    assert 0.0 < low["kl"] < 1e-4
    assert low["value"] == pytest.approx(ref["value"], rel=BF16_EPS / 4)
    assert low["surrogate"] == pytest.approx(ref["surrogate"], abs=BF16_EPS / 4)
    assert low["entropy"] == ref["entropy"]  # the std is a parameter, never autocast


def test_a_bfloat16_step_moves_the_policy_as_the_float32_step_does():
    base, storage = policy_and_storage()
    moves = []
    for bf16 in (False, True):
        policy = copy.deepcopy(base)
        ppo = PPO(policy, PPOConfig(bf16_update=bf16, learning_rate=1e-4, schedule="fixed"))
        ppo.storage = storage
        loss, _ = ppo.loss(one_batch(storage))
        loss.backward()
        moves.append(torch.cat([p.grad.flatten() for p in policy.parameters()]))
    cosine = torch.nn.functional.cosine_similarity(moves[0], moves[1], dim=0)
    assert float(cosine) > 0.999
    assert float((moves[1].norm() / moves[0].norm() - 1).abs()) < 0.01


def test_bf16_update_must_be_a_bool():
    with pytest.raises(ValueError, match="bf16_update must be True or False"):
        PPOConfig(bf16_update="yes")
