"""RunnerConfig.from_rsl_rl against configs shaped as rsl-rl-lib 5.x's (Isaac Lab's ``isaaclab_rl.rsl_rl``).

The dataclasses below mirror the field names of Isaac Lab 3.0's ``RslRlOnPolicyRunnerCfg``,
``RslRlMLPModelCfg``, ``GaussianDistributionCfg`` and ``RslRlPpoAlgorithmCfg`` (rsl-rl-lib 5.5.1), with
values unlike both libraries' defaults so that each mapped field shows where it lands.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import MISSING, dataclass, field
from typing import Any

import pytest

from ppo_bootstrap import PolicyConfig, PPOConfig, RunnerConfig
from ppo_bootstrap.rsl_rl import RslRlConfigError, env_obs_groups


def unset() -> Any:
    """A field Isaac Lab leaves ``MISSING``."""
    return field(default_factory=lambda: MISSING)


@dataclass
class GaussianDistributionCfg:
    class_name: str = "GaussianDistribution"
    init_std: float = 0.6
    std_type: str = "log"
    std_range: tuple[float, float] = (1e-6, 1e6)


@dataclass
class MLPModelCfg:
    class_name: str = "MLPModel"
    hidden_dims: list[int] = field(default_factory=lambda: [64, 32])
    activation: str = "tanh"
    obs_normalization: bool = True
    distribution_cfg: Any = None
    stochastic: Any = unset()  # the 4.x spelling, MISSING in Isaac Lab 3.0's defaults
    init_noise_std: Any = unset()
    noise_std_type: str = "scalar"
    state_dependent_std: bool = False


@dataclass
class SymmetryCfg:
    use_data_augmentation: bool = True
    use_mirror_loss: bool = True
    data_augmentation_func: Any = None
    mirror_loss_coeff: float = 0.3


@dataclass
class PpoAlgorithmCfg:
    class_name: str = "PPO"
    num_learning_epochs: int = 3
    num_mini_batches: int = 7
    learning_rate: float = 3e-4
    schedule: str = "fixed"
    gamma: float = 0.97
    lam: float = 0.9
    entropy_coef: float = 0.004
    desired_kl: float = 0.02
    max_grad_norm: float = 0.5
    optimizer: str = "adam"
    value_loss_coef: float = 0.7
    use_clipped_value_loss: bool = False
    clip_param: float = 0.15
    normalize_advantage_per_mini_batch: bool = True
    share_cnn_encoders: bool = False
    use_mixed_precision: bool = False
    rnd_cfg: Any = None
    symmetry_cfg: Any = None


@dataclass
class OnPolicyRunnerCfg:
    seed: int = 7
    device: str = "cuda:0"
    num_steps_per_env: int = 32
    init_at_random_ep_len: bool = True
    max_iterations: int = 1234
    empirical_normalization: Any = unset()
    obs_groups: dict = field(default_factory=lambda: {"actor": ["policy"], "critic": ["critic"]})
    clip_actions: Any = None
    check_for_nan: bool = False
    save_interval: int = 25
    experiment_name: str = "g1_flat"
    run_name: str = ""
    logger: str = "tensorboard"
    neptune_project: str = "isaaclab"
    wandb_project: str = "isaaclab"
    resume: bool = False
    load_run: str = ".*"
    load_checkpoint: str = "model_.*.pt"
    class_name: str = "OnPolicyRunner"
    actor: Any = field(default_factory=lambda: MLPModelCfg(distribution_cfg=GaussianDistributionCfg()))
    critic: Any = field(default_factory=lambda: MLPModelCfg(hidden_dims=[48, 24, 12]))
    algorithm: Any = field(default_factory=PpoAlgorithmCfg)
    torch_compile_mode: Any = None
    policy: Any = unset()


def as_dict(cfg: Any) -> Any:
    """The ``to_dict()`` form: nested dicts, ``MISSING`` as ``{}`` (as Isaac Lab's configclass writes it)."""
    if dataclasses.is_dataclass(cfg):
        return {f.name: as_dict(getattr(cfg, f.name)) for f in dataclasses.fields(cfg)}
    if cfg is MISSING:
        return {}
    return cfg


@pytest.mark.parametrize("form", ["object", "dict"])
def test_every_mapped_field_lands_where_it_should(form):
    agent = OnPolicyRunnerCfg()
    cfg = RunnerConfig.from_rsl_rl(agent if form == "object" else as_dict(agent), log_dir="runs/x")
    assert (cfg.num_steps_per_env, cfg.max_iterations, cfg.save_interval, cfg.seed) == (32, 1234, 25, 7)
    assert cfg.validate_env_output is False  # check_for_nan
    assert cfg.log_dir == "runs/x"  # an override
    assert cfg.policy == PolicyConfig(actor_hidden=(64, 32), critic_hidden=(48, 24, 12), activation="tanh",
                                      init_noise_std=0.6, std_type="log", obs_normalization=True)
    assert cfg.ppo == PPOConfig(num_learning_epochs=3, num_mini_batches=7, clip_param=0.15, gamma=0.97, lam=0.9,
                                value_loss_coef=0.7, use_clipped_value_loss=False, entropy_coef=0.004,
                                learning_rate=3e-4, max_grad_norm=0.5, schedule="fixed", desired_kl=0.02,
                                normalize_advantage_per_mini_batch=True, clip_grad_per_network=True,
                                shuffle="once")  # rsl-rl-lib draws one order of the samples per update
    assert cfg.ppo.timeout_bootstrap == "exact"
    assert env_obs_groups(agent) == {"policy": "policy", "critic": "critic"}


def test_symmetry_and_adaptive_schedule():
    algorithm = PpoAlgorithmCfg(schedule="adaptive", symmetry_cfg=SymmetryCfg())
    with pytest.warns(UserWarning, match="data_augmentation_func is not called"):
        ppo = RunnerConfig.from_rsl_rl(OnPolicyRunnerCfg(algorithm=algorithm)).ppo
    assert (ppo.schedule, ppo.desired_kl, ppo.symmetry_augmentation, ppo.symmetry_loss_coef) == ("adaptive", 0.02, True, 0.3)
    mirror_off = SymmetryCfg(use_data_augmentation=False, use_mirror_loss=False)
    ppo = RunnerConfig.from_rsl_rl(OnPolicyRunnerCfg(algorithm=PpoAlgorithmCfg(symmetry_cfg=mirror_off))).ppo
    assert (ppo.symmetry_augmentation, ppo.symmetry_loss_coef) == (False, 0.0)
    # rsl-rl-lib adapts the learning rate only with a target KL
    assert RunnerConfig.from_rsl_rl(OnPolicyRunnerCfg(algorithm=PpoAlgorithmCfg(schedule="adaptive", desired_kl=None))).ppo.schedule == "fixed"


def test_fields_a_dict_leaves_out_take_rsl_rl_defaults():
    agent = as_dict(OnPolicyRunnerCfg())
    for name in ("entropy_coef", "optimizer", "normalize_advantage_per_mini_batch", "share_cnn_encoders"):
        del agent["algorithm"][name]
    del agent["critic"]["activation"]
    agent["actor"]["activation"] = "elu"
    ppo = RunnerConfig.from_rsl_rl(agent).ppo
    assert ppo.entropy_coef == 0.01  # rsl-rl-lib's PPO default, not this library's 0.008
    assert ppo.normalize_advantage_per_mini_batch is False


def test_legacy_spellings():
    # 4.x: the actor's distribution through stochastic / init_noise_std / noise_std_type / state_dependent_std
    actor = MLPModelCfg(stochastic=True, init_noise_std=0.4, noise_std_type="log", state_dependent_std=True)
    policy = RunnerConfig.from_rsl_rl(OnPolicyRunnerCfg(actor=actor)).policy
    assert (policy.init_noise_std, policy.std_type) == (0.4, "state_dependent")
    # 3.x: one `policy` (RslRlPpoActorCriticCfg), normalization from the deprecated runner flag
    legacy = {"class_name": "ActorCriticRecurrent", "init_noise_std": 0.9, "noise_std_type": "scalar",
              "actor_hidden_dims": [16], "critic_hidden_dims": [24, 8], "activation": "swish",
              "actor_obs_normalization": MISSING, "critic_obs_normalization": MISSING,
              "rnn_type": "GRU", "rnn_hidden_dim": 20, "rnn_num_layers": 2}
    agent = OnPolicyRunnerCfg(actor=MISSING, critic=MISSING, policy=legacy, empirical_normalization=True,
                              obs_groups={"policy": ["policy"], "critic": ["policy"]})
    cfg = RunnerConfig.from_rsl_rl(agent)
    assert cfg.policy == PolicyConfig(
        actor_hidden=(16,), critic_hidden=(24, 8), activation="silu", init_noise_std=0.9, std_type="scalar",
        obs_normalization=True, recurrent="gru", rnn_hidden=20, rnn_layers=2)
    assert cfg.ppo.clip_grad_per_network is False  # 3.x's one ActorCritic clips its whole gradient at once
    assert env_obs_groups(agent) == {"policy": "policy"}  # the critic reads the actor's group


def _with(path: str, value: Any) -> dict:
    """The dict form of the test config with the field at dotted ``path`` set to ``value``."""
    agent = as_dict(OnPolicyRunnerCfg())
    *parents, name = path.split(".")
    node = agent
    for parent in parents:
        node = node[parent]
    node[name] = value
    return agent


UNSUPPORTED = [
    ("algorithm.rnd_cfg", {"weight": 1.0}, "algorithm.rnd_cfg"),
    ("algorithm.class_name", "Distillation", "algorithm.class_name"),
    ("algorithm.class_name", "rsl_rl.algorithms:SAC", "algorithm.class_name"),
    ("class_name", "DistillationRunner", "class_name"),
    ("algorithm.optimizer", "sgd", "algorithm.optimizer"),
    ("algorithm.use_mixed_precision", True, "algorithm.use_mixed_precision"),
    ("algorithm.share_cnn_encoders", True, "algorithm.share_cnn_encoders"),
    ("algorithm.schedule", "cosine", "algorithm.schedule"),
    ("algorithm.entropy_coef", {}, "algorithm.entropy_coef"),  # MISSING
    ("algorithm.lr_warmup", 10, "algorithm.lr_warmup"),  # unknown name
    ("algorithm.gamma", 1.5, "algorithm"),
    ("actor_extra", 1, "actor_extra"),
    ("actor.class_name", "CNNModel", "actor.class_name"),
    ("actor.hidden_dims", [-1, 32], "actor.hidden_dims"),
    ("actor.activation", "gelu", "actor.activation"),
    ("actor.distribution_cfg", None, "actor.distribution_cfg"),
    ("actor.distribution_cfg.std_range", (0.1, 2.0), "actor.distribution_cfg.std_range"),
    ("actor.distribution_cfg.learn_std", False, "actor.distribution_cfg.learn_std"),
    ("actor.distribution_cfg.class_name", "BetaDistribution", "actor.distribution_cfg.class_name"),
    ("actor.distribution_cfg", {"class_name": "HeteroscedasticGaussianDistribution", "init_std": 1.0,
                                "std_type": "scalar"}, "actor.distribution_cfg.std_type"),
    ("critic.obs_normalization", False, "critic.obs_normalization"),
    ("critic.distribution_cfg", {"class_name": "GaussianDistribution", "init_std": 1.0}, "critic.distribution_cfg"),
    ("obs_groups", {"actor": ["policy", "height_scan"], "critic": ["critic"]}, "obs_groups.actor"),
    ("obs_groups", {"actor": ["policy"], "rnd_state": ["policy"]}, "obs_groups.rnd_state"),
    ("clip_actions", -1.0, "clip_actions"),
    ("torch_compile_mode", "default", "torch_compile_mode"),
    ("empirical_normalization", True, "empirical_normalization"),
    ("policy", {"class_name": "ActorCritic"}, "policy"),
    ("num_steps_per_env", {}, "num_steps_per_env"),
]


@pytest.mark.parametrize("path, value, field_name", UNSUPPORTED, ids=[f"{p}={v!r}" for p, v, _ in UNSUPPORTED])
def test_each_unsupported_field_gives_one_line_naming_it(path, value, field_name):
    with pytest.raises(RslRlConfigError) as info:
        RunnerConfig.from_rsl_rl(_with(path, value))
    message = str(info.value)
    assert "\n" not in message
    assert info.value.field == field_name
    assert message.startswith(f"rsl_rl config field {field_name}:"), message


def test_a_non_config_is_refused():
    with pytest.raises(RslRlConfigError, match=re.escape("agent_cfg: expected a config object or a dict, got int")):
        RunnerConfig.from_rsl_rl(3)


def test_max_iterations_drives_learn_without_a_number():
    from scripted_env import ScriptedEnv

    from ppo_bootstrap import Runner

    small = dict(num_steps_per_env=2, console=False, policy=PolicyConfig(actor_hidden=(4,), critic_hidden=(4,)),
                 ppo=PPOConfig(num_mini_batches=1, num_learning_epochs=1))
    runner = Runner(ScriptedEnv(2, {}), RunnerConfig(max_iterations=3, **small))
    runner.learn()
    assert runner.iteration == 3
    with pytest.raises(ValueError, match="learn\\(\\) needs a number of iterations"):
        Runner(ScriptedEnv(2, {}), RunnerConfig(**small)).learn()
    with pytest.raises(ValueError, match="max_iterations must be an integer >= 0"):
        RunnerConfig(max_iterations=-1)
