"""One PPO update of ppo_bootstrap equals one of rsl-rl-lib 5.x's ``rsl_rl.algorithms.PPO``.

Compared: the actor's and critic's weights and the noise std after one ``update()``, the adaptive
learning rate it leaves, and its mean losses, when ppo_bootstrap's ``PPOConfig``/``PolicyConfig``
come from ``RunnerConfig.from_rsl_rl`` of the very dict rsl-rl-lib builds its PPO from
(``PPO.construct_algorithm``). Both start from the same weights (rsl-rl-lib's, copied through
``policy_state``, the checkpoint mapping) and each fills its own storage through its own
``act`` / ``process_env_step`` / ``compute_returns`` from one fixed rollout: the same observations,
rewards and dones, the same seed before every ``act`` (so both draw the same actions, which is
asserted), and log-probs, distribution parameters and values computed by each side.

Held equal on purpose, because the two libraries differ there by design, not in the update:

* dones are terminations only: rsl-rl-lib bootstraps a time-out with ``V(s_t)``, ppo_bootstrap
  (``timeout_bootstrap="exact"``) with the value of the true final observation;
* ``torch.randperm`` returns one fixed order: each draws one permutation per update for all its
  epochs (rsl-rl-lib's ``mini_batch_generator``; ``from_rsl_rl``'s ``shuffle="once"``, which the
  count of draws checks), from its own random stream.

``max_grad_norm`` = 0.05 is small so that every mini-batch's gradients are clipped (their norms
are 0.5 to 1.4 here, each network's and both together): rsl-rl-lib 5 clips the actor's and the
critic's norms each, which ``from_rsl_rl`` maps to ``clip_grad_per_network=True``; the second test
shows that one norm over both (``False``) moves the weights measurably elsewhere, so the
comparison sees that mapping.

Float32: ppo_bootstrap's rollout storage is float32 (so is rsl-rl-lib's), so the update cannot
run in float64 on both sides. The two sides round differently (advantage moments in float64 vs
float32, the KL by another formula, gradient norms summed in another order, the learning rate
kept as a float32 tensor vs a Python float): about 1e-7 relative per quantity, which four Adam
steps carry into the weights as at most one float32 ulp of a weight (1.5e-8 measured).
``ATOL`` = 1e-6 lies well above that and far below the 1e-3 by which one norm over both networks
moves the weights (``test_one_norm_over_both_networks_differs`` asserts > 100 x ``ATOL``).
"""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("rsl_rl")
from tensordict import TensorDict  # noqa: E402

from rsl_rl.algorithms import PPO as RslPPO  # noqa: E402

from ppo_bootstrap import RunnerConfig, StepResult  # noqa: E402
from ppo_bootstrap.modules.actor_critic import ActorCritic  # noqa: E402
from ppo_bootstrap.ppo import PPO  # noqa: E402
from ppo_bootstrap.rsl_rl import policy_state  # noqa: E402

T, N, A, D_POLICY, D_CRITIC = 8, 6, 3, 5, 7
ATOL = 1e-6

AGENT = {  # rsl-rl-lib 5.x's OnPolicyRunner config, as Isaac Lab's to_dict() writes it
    "num_steps_per_env": T, "max_iterations": 1, "save_interval": 50, "seed": 0, "multi_gpu": None,
    "obs_groups": {"actor": ["policy"], "critic": ["critic"]},
    "actor": {"class_name": "MLPModel", "hidden_dims": [16, 8], "activation": "elu", "obs_normalization": False,
              "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0, "std_type": "scalar"}},
    "critic": {"class_name": "MLPModel", "hidden_dims": [16, 8], "activation": "elu", "obs_normalization": False,
               "distribution_cfg": None},
    "algorithm": {"class_name": "PPO", "num_learning_epochs": 2, "num_mini_batches": 2, "clip_param": 0.2,
                  "gamma": 0.99, "lam": 0.95, "value_loss_coef": 1.0, "use_clipped_value_loss": True,
                  "entropy_coef": 0.01, "learning_rate": 1e-3, "schedule": "adaptive", "desired_kl": 0.01,
                  "max_grad_norm": 0.05, "optimizer": "adam", "normalize_advantage_per_mini_batch": False},
}


def _rollout() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    return {"policy": torch.randn(T + 1, N, D_POLICY, generator=g),
            "critic": torch.randn(T + 1, N, D_CRITIC, generator=g),
            "rewards": torch.randn(T, N, generator=g),
            "dones": torch.rand(T, N, generator=g) < 0.2}  # terminations only, none truncated


def _updated_pair(monkeypatch: pytest.MonkeyPatch, clip_grad_per_network: bool | None = None):
    """After one rollout and update each: rsl-rl-lib's weights (under ppo_bootstrap's names), learning
    rate and losses, then ppo_bootstrap's PPO and its update() statistics."""
    cfg = RunnerConfig.from_rsl_rl(AGENT)
    assert (cfg.ppo.clip_grad_per_network, cfg.ppo.shuffle) == (True, "once")  # the mapping under test
    if clip_grad_per_network is not None:
        cfg.ppo.clip_grad_per_network = clip_grad_per_network
    data = _rollout()
    assert data["dones"].any()

    def obs(t: int) -> dict[str, torch.Tensor]:
        return {"policy": data["policy"][t], "critic": data["critic"][t]}

    torch.manual_seed(0)
    env = SimpleNamespace(num_envs=N, num_actions=A)
    theirs = RslPPO.construct_algorithm(TensorDict(obs(0), batch_size=[N]), env, copy.deepcopy(AGENT), "cpu")

    def their_weights() -> dict[str, torch.Tensor]:
        return {"actor_state_dict": theirs.actor.state_dict(), "critic_state_dict": theirs.critic.state_dict()}

    policy = ActorCritic(D_POLICY, D_CRITIC, A, cfg.policy)
    policy.load_state_dict(policy_state("rsl-rl-lib", their_weights(), policy))
    ours = PPO(policy, cfg.ppo)
    ours.init_storage(T, N, obs(0), A)
    ours.start_rollout()

    with torch.no_grad():
        for t in range(T):
            torch.manual_seed(100 + t)
            their_actions = theirs.act(TensorDict(obs(t), batch_size=[N]))
            torch.manual_seed(100 + t)
            torch.testing.assert_close(ours.act(obs(t)), their_actions, rtol=0, atol=0)
            dones = data["dones"][t]
            theirs.process_env_step(TensorDict(obs(t + 1), batch_size=[N]), data["rewards"][t], dones, {})
            ended = dones.nonzero().flatten()
            ours.process_env_step(StepResult(obs(t + 1), data["rewards"][t], dones, torch.zeros_like(dones),
                                             {g: v[ended] for g, v in obs(t + 1).items()}, ended))
        theirs.compute_returns(TensorDict(obs(T), batch_size=[N]))
        ours.compute_returns(obs(T))

    order = torch.randperm(T * N, generator=torch.Generator().manual_seed(5))

    draws = []

    def fixed_randperm(n, **_):  # each draws one order per update, from its own random stream
        assert n == T * N
        draws.append(n)
        return order.clone()

    monkeypatch.setattr(torch, "randperm", fixed_randperm)
    their_stats = theirs.update()
    their_draws, draws[:] = len(draws), []
    our_stats = ours.update()
    monkeypatch.undo()
    assert (their_draws, len(draws)) == (1, 1)  # one order for all epochs, on both sides
    return policy_state("rsl-rl-lib", their_weights(), policy), theirs.learning_rate, their_stats, ours, our_stats


def test_one_update_equals_rsl_rl_lib(monkeypatch):
    theirs, their_lr, their_stats, ours, our_stats = _updated_pair(monkeypatch)
    state = ours.policy.state_dict()
    assert theirs.keys() == state.keys()
    for name, value in theirs.items():
        torch.testing.assert_close(state[name], value, rtol=0, atol=ATOL, msg=lambda m, n=name: f"{n}: {m}")
    assert their_lr == pytest.approx(1.5**3 * AGENT["algorithm"]["learning_rate"])  # KL 0, then 3 raises
    assert ours.learning_rate == pytest.approx(their_lr, rel=1e-6)  # float32 vs float: 4e-8 apart
    for key in ("value", "surrogate", "entropy"):  # the surrogate (~5e-3) is a mean of terms ~1 that cancel
        assert our_stats[f"loss/{key}"] == pytest.approx(their_stats[key], rel=1e-5, abs=1e-6)


def test_one_norm_over_both_networks_differs(monkeypatch):
    theirs, _, _, ours, _ = _updated_pair(monkeypatch, clip_grad_per_network=False)
    state = ours.policy.state_dict()
    gap = max(float((state[name] - value).abs().max()) for name, value in theirs.items())
    assert gap > 100 * ATOL
