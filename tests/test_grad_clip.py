"""Gradient clipping: one norm over the whole policy, or the actor's and the critic's each
(``PPOConfig.clip_grad_per_network``, as rsl-rl-lib 4.x/5.x clip). The gradients are set by hand so
that each set's norm is known; the expected norms after clipping are worked out in the comments."""

import math

import pytest
import torch

from ppo_bootstrap import PolicyConfig, PPOConfig
from ppo_bootstrap.modules.actor_critic import ActorCritic
from ppo_bootstrap.ppo import PPO


def _norm(params) -> float:
    return math.sqrt(sum(float(p.grad.double().square().sum()) for p in params))


def _set_norm(params, norm: float) -> None:
    """Give ``params`` gradients of total norm ``norm``: every entry the same value."""
    count = sum(p.numel() for p in params)
    for p in params:
        p.grad = torch.full_like(p, norm / math.sqrt(count))


@pytest.mark.parametrize("per_network", [False, True])
@pytest.mark.parametrize("actor_norm, critic_norm", [(3.0, 4.0), (0.3, 4.0)])
def test_each_clipped_set_ends_at_most_max_grad_norm(per_network, actor_norm, critic_norm):
    policy = ActorCritic(5, 7, 3, PolicyConfig(actor_hidden=(8,), critic_hidden=(6,)))
    ppo = PPO(policy, PPOConfig(max_grad_norm=1.0, clip_grad_per_network=per_network))
    actor, critic = policy.parameter_groups()
    _set_norm(actor, actor_norm)
    _set_norm(critic, critic_norm)
    ppo._clip_gradients()
    if per_network:  # each on its own: min(norm, 1)
        expected = (min(actor_norm, 1.0), min(critic_norm, 1.0))
    else:  # one norm: both scaled by 1 / sqrt(a^2 + c^2) (3, 4 -> 0.6, 0.8; 0.3, 4 -> 0.0748, 0.9972)
        total = math.hypot(actor_norm, critic_norm)
        expected = (actor_norm / total, critic_norm / total)
    assert (_norm(actor), _norm(critic)) == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("std_type", ["scalar", "log", "state_dependent"])
@pytest.mark.parametrize("recurrent", [None, "gru"])
def test_the_groups_hold_every_parameter_once_with_the_noise_std_in_the_actors(std_type, recurrent):
    policy = ActorCritic(5, 7, 3, PolicyConfig(actor_hidden=(8,), critic_hidden=(6,), std_type=std_type,
                                               recurrent=recurrent))
    actor, critic = policy.parameter_groups()
    ids = [id(p) for p in actor + critic]
    assert sorted(ids) == sorted(id(p) for p in policy.parameters()) and len(set(ids)) == len(ids)
    assert {id(p) for p in critic} == {id(p) for p in policy.critic.parameters()}
    if std_type != "state_dependent":
        assert any(p is policy.std_param for p in actor)


def test_clip_grad_per_network_is_checked():
    with pytest.raises(ValueError, match="clip_grad_per_network must be True or False"):
        PPOConfig(clip_grad_per_network="yes")
