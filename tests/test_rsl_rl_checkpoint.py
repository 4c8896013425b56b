"""Runner.load of checkpoints rsl-rl-lib wrote, in its 4.x/5.x and 3.x layouts.

``data/rsl_rl/rsl_rl_5.5.1_{scalar,log}.pt`` were written by rsl-rl-lib 5.5.1 itself: its
``OnPolicyRunner`` trained 3 iterations on a tiny random env (policy group 5 wide, critic group 7, 3
actions; actor ``MLPModel`` hidden (4, 3) with a Gaussian of init std 0.7, critic hidden (6, 2), both
normalizing observations) and saved with ``OnPolicyRunner.save``; ``data/rsl_rl/make_checkpoints.py``
is the script. The 3.x file is built here from the same tensors under the names rsl-rl-lib 3.x's
``ActorCritic`` gives them (``std``, ``actor.<i>``, ``actor_obs_normalizer``, ``critic.<i>``,
``critic_obs_normalizer``, in its state-dict order). rsl-rl-lib is not needed to run these tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ppo_bootstrap import CheckpointError, PolicyConfig, PPOConfig, Runner, RunnerConfig, StepResult
from ppo_bootstrap.checkpoint import load_policy

DATA = Path(__file__).parent / "data" / "rsl_rl"
POLICY_DIM, CRITIC_DIM, ACTIONS = 5, 7, 3


class RandomEnv:
    """Observations drawn around the ones the files' normalizers saw; no episode ever ends."""

    num_envs, num_actions, device = 6, ACTIONS, torch.device("cpu")

    def __init__(self) -> None:
        self.g = torch.Generator().manual_seed(1)

    def _obs(self) -> dict[str, torch.Tensor]:
        return {"policy": 3.0 + 2.0 * torch.randn(6, POLICY_DIM, generator=self.g),
                "critic": -1.0 + 0.5 * torch.randn(6, CRITIC_DIM, generator=self.g)}

    def reset(self) -> dict[str, torch.Tensor]:
        return self._obs()

    def step(self, actions: torch.Tensor) -> StepResult:
        none = torch.zeros(6, dtype=torch.bool)
        return StepResult(self._obs(), -actions.square().sum(-1), none, none.clone(),
                          {k: v[:0] for k, v in self._obs().items()}, torch.zeros(0, dtype=torch.long))


def runner_for(std_type: str = "scalar", env: RandomEnv | None = None, **policy: object) -> Runner:
    shape = dict(actor_hidden=(4, 3), critic_hidden=(6, 2), init_noise_std=0.7, std_type=std_type,
                 obs_normalization=True)
    cfg = RunnerConfig(num_steps_per_env=4, console=False, policy=PolicyConfig(**{**shape, **policy}),
                       ppo=PPOConfig(num_mini_batches=2, num_learning_epochs=1))
    return Runner(env or RandomEnv(), cfg)


def rsl_rl_file(std_type: str) -> dict:
    return torch.load(DATA / f"rsl_rl_5.5.1_{std_type}.pt", weights_only=False)


def as_3x(ckpt: dict) -> dict:
    """The same networks as rsl-rl-lib 3.x's ActorCritic saves them (``model_state_dict``)."""
    actor, critic = ckpt["actor_state_dict"], ckpt["critic_state_dict"]
    std_key = "std" if "distribution.std_param" in actor else "log_std"
    model = {std_key: actor.get("distribution.std_param", actor.get("distribution.log_std_param"))}
    for prefix, net in (("actor", actor), ("critic", critic)):
        model.update({f"{prefix}.{k[4:]}": v for k, v in net.items() if k.startswith("mlp.")})
        model.update({f"{prefix}_obs_normalizer.{k[15:]}": v for k, v in net.items() if k.startswith("obs_normalizer.")})
    # 3.x's Adam runs over std, then the actor's, then the critic's layers: the 5.x order here
    return {"model_state_dict": model, "optimizer_state_dict": ckpt["optimizer_state_dict"], "iter": ckpt["iter"],
            "infos": None}


def mlp64(net: dict, x: torch.Tensor) -> torch.Tensor:
    """rsl-rl-lib's normalizer and MLP (Linear, ELU, ..., Linear) from the raw tensors, in float64."""
    d = {k: v.double() for k, v in net.items()}
    h = (x.double() - d["obs_normalizer._mean"]) / (d["obs_normalizer._std"] + 0.01)
    layers = sorted({int(k.split(".")[1]) for k in d if k.startswith("mlp.")})
    for i in layers:
        h = h @ d[f"mlp.{i}.weight"].T + d[f"mlp.{i}.bias"]
        if i != layers[-1]:
            h = torch.where(h > 0, h, torch.expm1(h))
    return h


@pytest.mark.parametrize("layout", ["5.x", "3.x"])
@pytest.mark.parametrize("std_type", ["scalar", "log"])
def test_loaded_actor_and_critic_match_an_independent_forward_pass(tmp_path, layout, std_type, capsys):
    saved = rsl_rl_file(std_type)
    path = tmp_path / "model_2.pt"
    torch.save(saved if layout == "5.x" else as_3x(saved), path)
    runner = runner_for(std_type)
    runner.load(path)
    assert "rsl-rl-lib" in capsys.readouterr().out
    policy = runner.policy.eval()
    x = 3.0 + 2.0 * torch.randn(32, POLICY_DIM, generator=torch.Generator().manual_seed(5))
    c = -1.0 + 0.5 * torch.randn(32, CRITIC_DIM, generator=torch.Generator().manual_seed(6))
    actor, critic = saved["actor_state_dict"], saved["critic_state_dict"]
    with torch.no_grad():
        mean = policy.act_inference(x)[0]
        dist = policy.act(x, None)[0]
        value = policy.value(c, None)[0]
    torch.testing.assert_close(mean.double(), mlp64(actor, x), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(value.double(), mlp64(critic, c).squeeze(-1), rtol=1e-5, atol=1e-6)
    raw_std = actor["distribution.std_param"] if std_type == "scalar" else actor["distribution.log_std_param"].exp()
    torch.testing.assert_close(dist.stddev[0].double(), raw_std.double(), rtol=1e-6, atol=0)
    # the normalizers' moments, as rsl-rl-lib kept them
    norm = policy.actor.normalizer
    assert float(norm.count) == float(actor["obs_normalizer.count"])
    torch.testing.assert_close(norm.m2 / norm.count, actor["obs_normalizer._var"].squeeze(0).double())
    assert runner.iteration == saved["iter"] == 2 and runner.normalizers_warm


def test_fine_tuning_continues_rsl_rl_adam_state(tmp_path):
    saved = rsl_rl_file("scalar")
    path = tmp_path / "model_2.pt"
    torch.save(saved, path)
    runner = runner_for()
    runner.load(path)
    adam, file_adam = runner.alg.optimizer, saved["optimizer_state_dict"]
    params = dict(runner.policy.named_parameters())
    # rsl-rl-lib's parameter 0 is the actor's std, 1 its first layer's weight, 7 the critic's first weight
    for theirs, ours in ((0, "std_param"), (1, "actor.head.0.weight"), (7, "critic.head.0.weight")):
        for moment in ("exp_avg", "exp_avg_sq"):
            torch.testing.assert_close(adam.state[params[ours]][moment], file_adam["state"][theirs][moment])
    assert runner.alg.learning_rate == pytest.approx(file_adam["param_groups"][0]["lr"])
    runner.learn(1)
    assert runner.iteration == 3
    fresh = runner_for()
    fresh.load(path, load_optimizer=False)
    assert not fresh.alg.optimizer.state  # a fresh optimizer


class CountingEnv(RandomEnv):
    """:class:`RandomEnv` with an env-side step counter, as Isaac Lab's ``common_step_counter``."""

    def __init__(self) -> None:
        super().__init__()
        self.common_step_counter = 0

    def step(self, actions: torch.Tensor) -> StepResult:
        self.common_step_counter += 1
        return super().step(actions)


def test_the_envs_curriculum_clock_goes_on_from_the_files_iteration(tmp_path, capsys):
    """rsl-rl-lib records its iteration (2) but no env step count: the env's counter goes on from 2
    iterations of this runner's 4 steps, 8, where Isaac Lab's own resume would start it at 0."""
    path = tmp_path / "model_2.pt"
    torch.save(rsl_rl_file("scalar"), path)
    env = CountingEnv()
    runner = runner_for(env=env)
    runner.load(path)
    assert "continues at 8" in capsys.readouterr().out
    assert env.common_step_counter == runner.env_steps == 8
    runner.learn(1)
    assert env.common_step_counter == runner.env_steps == 12


@pytest.mark.parametrize("change, expected", [
    (dict(actor_hidden=(4, 4)), "actor_state_dict['mlp.2.weight'] has shape (3, 4), this runner's layer "
                                "actor.head.2.weight (4, 4)"),
    (dict(std_type="log"), "actor_state_dict['distribution.std_param'] is a 'scalar' std, this runner's std_type is 'log'"),
    (dict(obs_normalization=False), "has an observation normalizer for the actor, this runner has none"),
    (dict(std_type="state_dependent"), "actor_state_dict['distribution.std_param'] is a 'scalar' std"),
])
def test_a_mismatch_gives_one_line_naming_the_layer(tmp_path, change, expected):
    path = tmp_path / "model_2.pt"
    torch.save(rsl_rl_file("scalar"), path)
    runner = runner_for(**change)
    before = {k: v.clone() for k, v in runner.policy.state_dict().items()}
    with pytest.raises(CheckpointError) as info:
        runner.load(path)
    assert "\n" not in str(info.value) and expected in str(info.value), str(info.value)
    assert all(torch.equal(before[k], v) for k, v in runner.policy.state_dict().items())  # unchanged


def test_rnd_and_foreign_layers_are_refused(tmp_path):
    saved = rsl_rl_file("scalar")
    path = tmp_path / "rnd.pt"
    torch.save({**saved, "rnd_state_dict": {"w": torch.zeros(1)}}, path)
    with pytest.raises(CheckpointError, match="holds an RND network"):
        runner_for().load(path)
    actor = dict(saved["actor_state_dict"], **{"encoder.0.weight": torch.zeros(2, 2)})
    torch.save({**saved, "actor_state_dict": actor}, path)
    with pytest.raises(CheckpointError, match=r"actor_state_dict\['encoder.0.weight'\] has no counterpart"):
        runner_for().load(path)


def test_playback_loader_points_to_the_runner(tmp_path):
    path = tmp_path / "model_2.pt"
    torch.save(rsl_rl_file("scalar"), path)
    env = RandomEnv()
    with pytest.raises(CheckpointError, match="was written by rsl-rl-lib .* RunnerConfig.from_rsl_rl"):
        load_policy(path, env.reset(), ACTIONS)


def test_advantages_normalized_per_mini_batch():
    cfg = RunnerConfig(num_steps_per_env=4, console=False, policy=PolicyConfig(actor_hidden=(4,), critic_hidden=(4,)),
                       ppo=PPOConfig(num_mini_batches=1, normalize_advantage_per_mini_batch=True))
    runner = Runner(RandomEnv(), cfg)
    runner._collect()
    runner.alg.compute_returns(runner.obs)
    data = runner.alg.storage.data
    # left as GAE made them (no rollout normalization): returns = advantages + values
    torch.testing.assert_close(data["advantages"] + data["values"], data["returns"])
    assert abs(float(data["advantages"].mean())) > 1e-3
    batch = data.reshape(-1).clone()
    # ratios away from 1 (at 1 the surrogate of normalized advantages is their mean, 0)
    batch["log_probs"] = batch["log_probs"] + 0.1 * torch.randn(batch.shape[0], generator=torch.Generator().manual_seed(2))
    shifted = batch.clone()
    shifted["advantages"] = 5.0 * batch["advantages"] + 3.0  # normalizes to the same values
    surrogate = [float(runner.alg.loss(b)[1]["surrogate"].detach()) for b in (batch, shifted)]
    assert surrogate[0] == pytest.approx(surrogate[1], rel=1e-5)
    runner.alg.cfg.normalize_advantage_per_mini_batch = False
    assert float(runner.alg.loss(shifted)[1]["surrogate"].detach()) != pytest.approx(surrogate[0], rel=1e-3)
    with pytest.raises(ValueError, match="normalize_advantage_per_mini_batch=True needs normalize_advantage=True"):
        PPOConfig(normalize_advantage=False, normalize_advantage_per_mini_batch=True)
