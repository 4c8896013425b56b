"""``RunnerConfig.overlap_update``: each rollout is collected while the update of the one before it
trains, so rollout ``k`` is acted by the policy of update ``k - 2`` and trained on by update ``k``,
with its values from the critic update ``k`` starts from.

The schedule is checked step by step against the parameters recorded around every update, the stored
log-probabilities against a copy of the policy that acted and the values against a copy of the critic
that trains, each recomputed here."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass

import pytest
import torch

from ppo_bootstrap import PolicyConfig, PPOConfig, Runner, RunnerConfig
from ppo_bootstrap.env import POLICY
from scripted_env import ScriptedEnv
from test_runner import TRUE_VALUE, value_run

ENDS = {(1, 0): (True, False), (2, 1): (False, True), (5, 2): (True, True)}


def _params(module: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in module.parameters()]


def _same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return all(torch.equal(x.cpu(), y.cpu()) for x, y in zip(a, b))


@dataclass
class Recorded:
    """An overlapped training and what :func:`_recorded_training` saw, one entry per update or rollout:
    the policy's parameters before and after each update and its whole state (normalizers too) as each
    update started, the acting copy's state as each rollout started, each rollout's stored data as its
    update read it, and each update's losses per mini-batch."""

    runner: Runner
    before: list[list[torch.Tensor]]
    after: list[list[torch.Tensor]]
    starts: list[dict[str, torch.Tensor]]
    acted: list[dict[str, torch.Tensor]]
    trained: list[dict[str, torch.Tensor]]
    losses: list[torch.Tensor]


def _recorded_training(device: str, iterations: int, tmp_path=None, **cfg) -> Recorded:
    """Train with overlap on, recording the parameters around each update, the acting copy's at each
    rollout, and each rollout's stored data as the update that trains on it reads it."""
    env = ScriptedEnv(3, ENDS)
    runner = Runner(env, RunnerConfig(num_steps_per_env=4, overlap_update=True, console="off",
                                      save_interval=1 if tmp_path else 0, log_dir=str(tmp_path) if tmp_path else None,
                                      **cfg), device=device)
    alg = runner.alg
    before, after, acted, trained, starts, losses = [], [], [], [], [], []
    launch, act = alg.launch_update, alg.act

    def recording_launch(generator=None):
        before.append(_params(alg.policy))
        starts.append({k: v.clone() for k, v in alg.policy.state_dict().items()})
        data = alg.storage.data
        trained.append({k: data[k].clone() for k in ("actions", "log_probs", "action_mean", "action_std", "values",
                                                     "importance_weights")} | {"obs": data["obs"][POLICY].clone()})
        out = launch(generator)
        after.append(_params(alg.policy))  # queued after the update on its stream
        losses.append(out)
        return out

    def recording_act(obs):
        if alg.storage.step == 0:  # its weights and its normalizers' statistics
            acted.append({k: v.clone() for k, v in alg.acting.state_dict().items()})
        return act(obs)

    alg.launch_update, alg.act = recording_launch, recording_act
    runner.learn(iterations)
    if device == "cuda":
        torch.cuda.synchronize()
    acted = acted[len(acted) - iterations:]  # the normalizers' warm-up rollout before them trains nothing
    return Recorded(runner, before, after, starts, acted, trained, losses)


def _acting_and_starting(rec: Recorded, k: int):
    """The action distributions of rollout ``k`` (1-based) under the policy that acted it and the one
    its update started from, recomputed with copies of the policy holding their recorded states."""
    rollout = rec.trained[k - 1]
    dists = []
    for state in (rec.acted[k - 1], rec.starts[k - 1]):
        policy = copy.deepcopy(rec.runner.policy)
        policy.load_state_dict(state)
        with torch.no_grad():
            dists.append(policy.act(rollout["obs"], None)[0])
    return tuple(dists)


def _weights(runner: Runner, state: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    return [state[name] for name, _ in runner.policy.named_parameters()]


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs CUDA (the update in a second stream)"))])
def test_each_rollout_is_acted_one_update_behind_and_trained_on_by_its_own_update(device) -> None:
    n = 5
    rec = _recorded_training(device, n)
    runner, before, after, acted, trained = rec.runner, rec.before, rec.after, rec.acted, rec.trained
    assert runner.iteration == n and len(before) == len(after) == len(acted) == len(trained) == n
    theta = [before[0]] + after  # theta[j]: the policy after j updates
    for k in range(1, n + 1):  # rollout k, 1-based
        assert _same(_weights(runner, acted[k - 1]), theta[max(k - 2, 0)]), f"rollout {k}: not update {max(k - 2, 0)}'s"
        assert _same(before[k - 1], theta[k - 1])  # update k starts where update k - 1 ended
        assert not _same(theta[k], theta[k - 1])  # and moves the policy
    assert _same(_params(runner.policy), theta[n])
    # what update k reads, recomputed with copies holding the acting policy's and its own starting state:
    # the values and the action distribution (the proximal policy) are the starting policy's, and each
    # sample's weight is its action's probability under that policy over the acting policy's
    for k in range(1, n + 1):
        rollout = trained[k - 1]
        acting, dist = _acting_and_starting(rec, k)
        acting_log_probs = acting.log_prob(rollout["actions"]).sum(-1)
        learner = copy.deepcopy(runner.policy)
        learner.load_state_dict(rec.starts[k - 1])
        with torch.no_grad():
            values = learner.value(rollout["obs"], None)[0]
        torch.testing.assert_close(rollout["log_probs"], dist.log_prob(rollout["actions"]).sum(-1), rtol=0, atol=1e-5)
        torch.testing.assert_close(rollout["action_mean"], dist.mean, rtol=0, atol=1e-6)
        torch.testing.assert_close(rollout["action_std"], dist.stddev, rtol=0, atol=1e-6)
        torch.testing.assert_close(rollout["importance_weights"].double().log(),
                                   (rollout["log_probs"] - acting_log_probs).double(), rtol=0, atol=1e-5)
        torch.testing.assert_close(rollout["values"], values, rtol=0, atol=1e-5)
    assert not torch.allclose(trained[-1]["importance_weights"], torch.ones(())), "the lag moved no probability"


def test_each_update_measures_its_kl_from_the_policy_it_starts_from() -> None:
    """The adaptive learning rate sees the step of one update, as without the overlap: the KL of each
    update's first mini-batch, taken before its first gradient step, is zero, whereas the acting
    policy, one update behind, is measurably apart (the KL that the schedule saw before the proximal
    policy, and that drove the learning rate to its floor)."""
    n = 4
    rec = _recorded_training("cpu", n, ppo=PPOConfig(num_mini_batches=2, num_learning_epochs=2))
    for k in range(1, n + 1):
        first_kl = float(rec.losses[k - 1][0, 3])  # [mini-batch, (value, surrogate, entropy, kl, symmetry)]
        assert abs(first_kl) < 1e-9, f"update {k}: its first mini-batch's KL is {first_kl}, not from its own start"
        assert float(rec.losses[k - 1][-1, 3]) > 0  # and its later mini-batches see its own steps
        if k >= 2:  # update 1 starts from the policy that acted
            acting, start = _acting_and_starting(rec, k)
            assert _kl(acting.mean, acting.stddev, start.mean, start.stddev) > 1e-4, "the check is vacuous"


def _kl(mu0: torch.Tensor, std0: torch.Tensor, mu1: torch.Tensor, std1: torch.Tensor) -> float:
    """Mean ``KL(N(mu0, std0) || N(mu1, std1))`` over samples, summed over the action dim, in float64."""
    mu0, std0, mu1, std1 = (x.double() for x in (mu0, std0, mu1, std1))
    return float(((std1 / std0).log() + (std0**2 + (mu0 - mu1) ** 2) / (2 * std1**2) - 0.5).sum(-1).mean())


def test_every_iteration_is_logged_and_saved_with_the_policy_of_its_own_update(tmp_path) -> None:
    rec = _recorded_training("cpu", 3, tmp_path)
    runner, after = rec.runner, rec.after
    for k in (1, 2, 3):
        ckpt = torch.load(tmp_path / f"model_{k}.pt", map_location="cpu", weights_only=False)
        assert ckpt["iteration"] == k
        saved = [ckpt["policy"][name] for name, _ in runner.policy.named_parameters()]
        assert _same(saved, after[k - 1])
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [row["iteration"] for row in rows] == [1, 2, 3]
    assert all({"loss/surrogate", "perf/collection_s", "perf/learning_s", "policy/kl"} <= set(row) for row in rows)


def test_overlap_off_acts_with_the_policy_itself_and_keeps_one_storage() -> None:
    runner = Runner(ScriptedEnv(3, ENDS), RunnerConfig(num_steps_per_env=4, console="off", save_interval=0))
    storage = runner.alg.storage
    runner.learn(2)
    assert runner.alg.acting is runner.policy and runner.alg.storage is storage


def test_a_resume_acts_with_the_loaded_policy(tmp_path) -> None:
    """learn() brings the acting copy up to date: after load() the first rollout acts with the loaded weights."""
    after = _recorded_training("cpu", 2, tmp_path).after
    runner = _recorded_training("cpu", 0).runner
    runner.load(str(tmp_path / "model_2.pt"))
    alg, act = runner.alg, runner.alg.act
    seen = []
    alg.act = lambda obs: (seen.append(_params(alg.acting)) if alg.storage.step == 0 else None, act(obs))[1]
    runner.learn(1)
    assert _same(seen[0], after[1])  # the loaded run's warm-up was saved with it: no warm-up rollout here


@pytest.mark.parametrize(("cfg", "message"), [
    ({"overlap_update": "yes"}, "overlap_update must be True or False"),
    ({"overlap_update": True, "policy": PolicyConfig(recurrent="gru")}, "overlap_update needs a feed-forward policy"),
])
def test_bad_settings_are_one_line_naming_the_field(cfg, message) -> None:
    with pytest.raises(ValueError, match=message) as err:
        Runner(ScriptedEnv(3, ENDS), RunnerConfig(num_steps_per_env=4, console="off", **cfg))
    assert "\n" not in str(err.value)


def test_the_exact_bootstrap_still_learns_the_true_value_of_an_endless_time_limited_task() -> None:
    """The one-update lag leaves the value targets exact: the critic of an overlapped training reaches
    the closed-form value 1 / (1 - gamma) of reward 1 forever, as the default training does
    (``tests/test_runner.py``, the same task and settings)."""
    assert abs(value_run("exact", overlap_update=True) - TRUE_VALUE) < 0.05 * TRUE_VALUE


def test_a_stop_after_an_iteration_saves_it_and_trains_no_further(tmp_path) -> None:
    """A signal seen after iteration 2 (the Runner's check answers as a signal would): its checkpoint
    holds update 2's policy, and the rollout collected meanwhile starts no update."""
    env = ScriptedEnv(3, ENDS)
    runner = Runner(env, RunnerConfig(num_steps_per_env=4, overlap_update=True, console="off", save_interval=0,
                                      log_dir=str(tmp_path)))
    launched, launch = [], runner.alg.launch_update
    runner.alg.launch_update = lambda generator=None: (launched.append(1), launch(generator))[1]

    def stop_after_two(stop, after: str) -> bool:
        runner.interrupted = after == "iteration 2"
        return runner.interrupted

    runner._stop_requested = stop_after_two
    runner.learn(10)
    assert runner.iteration == 2 and len(launched) == 2 and runner.interrupted
    assert [p.name for p in tmp_path.glob("model_*.pt")] == ["model_2.pt"]
    ckpt = torch.load(tmp_path / "model_2.pt", map_location="cpu", weights_only=False)
    assert all(torch.equal(ckpt["policy"][k], v) for k, v in runner.policy.state_dict().items())


def test_an_update_recorded_before_the_lag_is_recorded_again() -> None:
    """A recorded update (a CUDA graph) gathers the storage fields it was captured with: the acting copy
    adds the importance weights, so an update recorded before it must not replay without them."""
    runner = Runner(ScriptedEnv(3, ENDS), RunnerConfig(num_steps_per_env=4, console="off", save_interval=0))
    alg = runner.alg
    alg._graph = object()  # stands for a step captured on the storage as it was
    alg.lag_acting()
    assert alg._graph is None
    assert all("importance_weights" in s.data.keys() for s in (alg.storage, alg._spare[0]))
