"""Storage memory and observation normalization."""

import pytest
import torch

from ppo_bootstrap import PPO, ActorCritic, PolicyConfig, PPOConfig, Runner, RunnerConfig, RolloutStorage, StepResult
from ppo_bootstrap.storage import Transition
from ppo_bootstrap.envs import TimeLimitEnv
from ppo_bootstrap.modules import EmpiricalNormalization
from host_copies import HostCopies


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


def test_a_normalizer_update_copies_nothing_from_the_host():
    """The merge of a batch stays on the normalizer's device: on a GPU a copy from the host would
    wait for everything queued before it on its stream (``overlap_update`` merges in the stream of
    the update, and such a copy held the host there until the update ended)."""
    norm = EmpiricalNormalization(5).to("meta")
    with HostCopies() as mode:
        norm.update(torch.empty(7, 5, device="meta"))
    assert mode.seen == [] and norm.count.device.type == "meta" and norm.count.dtype == torch.float64


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


def _random_rollout(T, N, seed, state_shape=None):
    """Per step: transition obs, flags, pre-reset critic obs of every env, critic state (or None)."""
    g = torch.Generator().manual_seed(seed)
    steps = []
    for _ in range(T):
        terminated = torch.rand(N, generator=g) < 0.2
        truncated = torch.rand(N, generator=g) < 0.2
        obs = {"policy": torch.randn(N, 3, generator=g), "critic": torch.randn(N, 5, generator=g)}
        before_reset = {k: torch.randn(v.shape, generator=g) for k, v in obs.items()}
        state = torch.randn(*state_shape, generator=g) if state_shape else None
        steps.append((obs, terminated, truncated, before_reset, state))
    return steps


def _fill(storage, steps, dense_at):
    zeros = torch.zeros(storage.num_envs, 2)
    storage.start((None, None))
    for t, (obs, terminated, truncated, before_reset, state) in enumerate(steps):
        transition = Transition(obs, zeros, zeros, zeros, zeros[:, 0], zeros[:, 0], critic_state=state)
        if t in dense_at:
            result = StepResult(obs, zeros[:, 0], terminated, truncated, None, None, final_obs_all=before_reset)
        else:
            ended = torch.nonzero(terminated | truncated).flatten()
            result = StepResult(obs, zeros[:, 0], terminated, truncated,
                                {k: v[ended] for k, v in before_reset.items()}, ended)
        storage.add(transition, result)
    return storage.finish()


@pytest.mark.parametrize("state_shape", [None, (2, 7, 4)], ids=["mlp", "recurrent"])
@pytest.mark.parametrize("dense_at", [range(6), {1, 4}], ids=["dense", "mixed"])
def test_dense_final_observations_give_the_rows_of_the_sparse_form(dense_at, state_shape):
    T, N = 6, 7
    steps = _random_rollout(T, N, seed=3, state_shape=state_shape)
    sparse_rows = _fill(RolloutStorage(T, N, {"policy": (3,), "critic": (5,)}, 2, "cpu"), steps, dense_at=())
    rows = _fill(RolloutStorage(T, N, {"policy": (3,), "critic": (5,)}, 2, "cpu"), steps, dense_at=dense_at)
    # expected by hand: every (t, env) that ended, in step then env order, with that step's pre-reset critic row
    expected = [(t, e) for t, (_, term, trunc, _, _) in enumerate(steps) for e in range(N) if term[e] or trunc[e]]
    assert list(zip(rows.step.tolist(), rows.env_id.tolist())) == expected
    assert list(zip(sparse_rows.step.tolist(), sparse_rows.env_id.tolist())) == expected
    want = torch.stack([steps[t][3]["critic"][e] for t, e in expected])
    assert set(rows.obs.keys()) == {"critic"}  # what the critic reads; the policy group is not kept
    assert torch.equal(rows.obs["critic"], want) and torch.equal(sparse_rows.obs["critic"], want)
    if state_shape is None:
        assert rows.critic_state is None
    else:
        want_state = torch.stack([steps[t][4][:, e] for t, e in expected], dim=1)
        assert torch.equal(rows.critic_state, want_state) and torch.equal(sparse_rows.critic_state, want_state)


def test_dense_form_without_ends_gives_no_rows():
    T, N = 3, 4
    steps = [(o, torch.zeros(N, dtype=torch.bool), torch.zeros(N, dtype=torch.bool), b, s)
             for o, _, _, b, s in _random_rollout(T, N, seed=0)]
    assert _fill(RolloutStorage(T, N, {"policy": (3,), "critic": (5,)}, 2, "cpu"), steps, dense_at=range(T)) is None


def test_dense_form_contract_rows_and_finiteness():
    from dataclasses import replace

    from ppo_bootstrap.episode import EpisodeProtocolError, check_contract, check_finite, final_rows

    obs = {"policy": torch.arange(4.0).unsqueeze(-1)}
    terminated = torch.tensor([False, True, False, False])
    truncated = torch.tensor([False, False, False, True])
    before = {"policy": torch.tensor([[10.0], [11.0], [float("nan")], [13.0]])}  # env 2 did not end
    result = StepResult(obs, torch.zeros(4), terminated, truncated, None, None, final_obs_all=before)
    check_contract(4, result)
    check_finite(result)  # the NaN sits in a row that is no final observation
    ids, rows = final_rows(result)
    assert ids.tolist() == [1, 3] and rows["policy"].flatten().tolist() == [11.0, 13.0]
    broken = replace(result, final_obs_all={"policy": torch.tensor([[10.0], [float("inf")], [12.0], [13.0]])})
    with pytest.raises(EpisodeProtocolError, match=r"final_obs\['policy'\] has NaN or inf for env ids \[1\]"):
        check_finite(broken)
    short = replace(result, final_obs_all={"policy": torch.zeros(3, 1)})
    with pytest.raises(EpisodeProtocolError, match=r"final_obs_all\['policy'\] has shape \(3, 1\), expected \(4, 1\)"):
        check_contract(4, short)
    both = replace(result, final_obs={"policy": rows["policy"]}, final_env_ids=ids)
    with pytest.raises(EpisodeProtocolError, match="not both"):
        check_contract(4, both)
    with pytest.raises(EpisodeProtocolError, match="final_env_ids must be a torch.Tensor"):
        check_contract(4, replace(result, final_obs_all=None))


def test_every_epochs_order_drawn_at_once_is_the_orders_drawn_one_by_one():
    """The graphed update draws all epochs' orders before its first replay: the same random numbers,
    in the same order, as one draw per epoch (so graphed and eager updates see the same batches)."""
    storage = RolloutStorage(6, 8, {"policy": (3,)}, 2, "cpu")
    orders, size = storage.permutations(5, 4, torch.Generator().manual_seed(3))
    one_by_one = torch.Generator().manual_seed(3)
    singles = [storage.permutation(4, one_by_one) for _ in range(5)]
    assert orders.shape == (5, 48) and orders.dtype == torch.long and size == 12
    assert all(s == 12 for _, s in singles)
    torch.testing.assert_close(orders, torch.stack([order for order, _ in singles]), rtol=0, atol=0)
    assert all(torch.equal(order.sort().values, torch.arange(48)) for order in orders)
    assert len({tuple(order.tolist()) for order in orders}) == 5  # a new shuffle each epoch
    # what the eager path then gathers: rows of the flattened rollout in the first order
    storage.data["rewards"].copy_(torch.arange(48.0).reshape(6, 8))
    first = [batch["rewards"] for batch, _, _ in storage.mini_batches(4, torch.Generator().manual_seed(3))]
    torch.testing.assert_close(torch.cat(first), orders[0].float(), rtol=0, atol=0)
    with pytest.raises(ValueError, match="48 samples do not split into 5 mini-batches"):
        storage.permutations(2, 5)


@pytest.mark.parametrize("shuffle", ["every_epoch", "once"])
def test_an_updates_mini_batches_follow_its_shuffle(monkeypatch, shuffle):
    """``every_epoch``: epoch ``e`` gathers the samples in the ``e``-th order drawn from the update's
    generator; ``once`` (rsl-rl-lib's): every epoch gathers them in the first of those orders, so
    mini-batch ``i`` holds the same samples in each epoch."""
    epochs, mini_batches = 3, 4
    ppo = PPO(ActorCritic(3, 3, 2, PolicyConfig(actor_hidden=(8,), critic_hidden=(8,))),
              PPOConfig(num_learning_epochs=epochs, num_mini_batches=mini_batches, shuffle=shuffle))
    ppo.storage = RolloutStorage(6, 8, {"policy": (3,)}, 2, "cpu")
    ppo.storage.data["rewards"].copy_(torch.arange(48.0).reshape(6, 8))  # each sample's rollout index
    seen = []
    monkeypatch.setattr(ppo, "_step", lambda batch, states, starts: seen.append(batch["rewards"]) or torch.zeros(5))
    ppo.update(torch.Generator().manual_seed(3))
    drawn, _ = ppo.storage.permutations(epochs, mini_batches, torch.Generator().manual_seed(3))
    gathered = torch.stack(seen).reshape(epochs, 48).long()  # epoch by epoch, mini-batch after mini-batch
    expected = drawn if shuffle == "every_epoch" else drawn[:1].expand(epochs, -1)
    torch.testing.assert_close(gathered, expected, rtol=0, atol=0)
    assert len({tuple(order.tolist()) for order in gathered}) == (epochs if shuffle == "every_epoch" else 1)


def test_an_unknown_shuffle_is_refused_by_name():
    with pytest.raises(ValueError, match="shuffle must be one of every_epoch, once, got 'never'"):
        PPOConfig(shuffle="never")
