"""rsl-rl-lib agent configurations and checkpoints, taken as they are.

:meth:`RunnerConfig.from_rsl_rl <ppo_bootstrap.runner.RunnerConfig.from_rsl_rl>` reads Isaac Lab's
``RslRlOnPolicyRunnerCfg`` (``isaaclab_rl.rsl_rl``), or its ``to_dict()``, with the fields rsl-rl-lib
3.x to 5.x define; :meth:`Runner.load <ppo_bootstrap.runner.Runner.load>` reads the checkpoints
rsl-rl-lib's ``OnPolicyRunner.save`` writes (through :func:`policy_state` and :func:`optimizer_state`).
Nothing here imports rsl-rl-lib or Isaac Lab.

Every field is either mapped, accepted as bookkeeping, or refused with one line naming it
(:class:`RslRlConfigError`); an unknown field name is refused too. A field a dict leaves out takes
rsl-rl-lib's default (:data:`RSL_RL_PPO_DEFAULTS`, :data:`RSL_RL_MODEL_DEFAULTS`); a required one
Isaac Lab leaves ``MISSING`` is refused as not set.

Runner (``RslRlOnPolicyRunnerCfg``):

=========================== ===========================================================================
rsl_rl field                ppo_bootstrap
=========================== ===========================================================================
``num_steps_per_env``       ``RunnerConfig.num_steps_per_env``
``max_iterations``          ``RunnerConfig.max_iterations`` (``Runner.learn()`` without a number)
``save_interval``           ``RunnerConfig.save_interval`` (``model_<n>.pt`` after ``n`` iterations)
``seed``                    ``RunnerConfig.seed``
``check_for_nan``           ``RunnerConfig.validate_env_output``
``obs_groups``              the env adapter's ``obs_groups`` (:func:`env_obs_groups`); one env group
                            per set (``actor``/``policy``, ``critic``), else refused
``clip_actions``            the env adapter's ``clip_actions`` (as train.py gives it to
                            ``RslRlVecEnvWrapper``); checked here
``init_at_random_ep_len``   not the Runner's: train.py sets the env's episode clocks
                            (``docs/isaaclab_rsl_rl.md``); checked here
``class_name``              ``"OnPolicyRunner"`` only (``DistillationRunner`` refused)
``torch_compile_mode``      ``None`` only (the Runner captures CUDA graphs instead)
``empirical_normalization`` deprecated: fills the unset ``policy`` normalization flags; refused
                            beside ``actor``/``critic``
``experiment_name``,        bookkeeping (log directory names, loggers, resuming, device and process
``run_name``, ``logger``,   layout are the caller's: ``log_dir=`` / ``Runner(..., device=)`` /
``*_project``, ``resume``,  ``Runner.load``)
``load_run``,
``load_checkpoint``,
``device``, ``multi_gpu``
=========================== ===========================================================================

Networks: ``actor`` and ``critic`` (4.x/5.x ``RslRlMLPModelCfg`` / ``RslRlRNNModelCfg``), or the
older ``policy`` (``RslRlPpoActorCriticCfg`` / ``...RecurrentCfg``), onto ``PolicyConfig``:

====================================================== ===================================================
rsl_rl field                                           ppo_bootstrap ``PolicyConfig``
====================================================== ===================================================
``actor.hidden_dims`` / ``policy.actor_hidden_dims``   ``actor_hidden`` (no ``-1`` entries)
``critic.hidden_dims`` / ``policy.critic_hidden_dims`` ``critic_hidden``
``activation`` (actor's = critic's)                    ``activation`` (``swish`` is ``silu``)
``obs_normalization`` / ``*_obs_normalization``        ``obs_normalization`` (actor's = critic's)
``distribution_cfg.init_std`` / ``init_noise_std``     ``init_noise_std``
``GaussianDistribution``, ``std_type`` scalar / log    ``std_type="scalar"`` / ``"log"``
``HeteroscedasticGaussianDistribution``, ``log``       ``std_type="state_dependent"`` (``scalar``: refused)
``distribution_cfg.std_range``                         ``(1e-6, 1e6)`` only; ``learn_std=False`` refused
``stochastic``, ``noise_std_type``,                    the 4.x spelling of ``distribution_cfg``, read
``state_dependent_std``                                when ``distribution_cfg`` is unset
``RNNModel`` / ``ActorCriticRecurrent``: ``rnn_type``, ``recurrent``, ``rnn_hidden``, ``rnn_layers`` (both
``rnn_hidden_dim``, ``rnn_num_layers``                 networks alike)
``CNNModel``, a stochastic critic                      refused
====================================================== ===================================================

Algorithm (``RslRlPpoAlgorithmCfg``) onto ``PPOConfig``: ``num_learning_epochs``,
``num_mini_batches``, ``clip_param``, ``gamma``, ``lam``, ``value_loss_coef``,
``use_clipped_value_loss``, ``entropy_coef``, ``learning_rate``, ``max_grad_norm`` (for each network
on its own, as rsl-rl-lib 4.x/5.x clip their ``actor`` and ``critic``: ``clip_grad_per_network``; one
norm over both for 3.x's ``policy``), ``normalize_advantage_per_mini_batch``
under the same names; ``schedule`` and ``desired_kl`` too (``desired_kl=None`` means ``fixed``, as
in rsl-rl-lib). ``symmetry_cfg``: ``use_data_augmentation`` -> ``symmetry_augmentation``,
``use_mirror_loss`` with ``mirror_loss_coeff`` -> ``symmetry_loss_coef``; the mirror is the env's
``symmetry`` (a :class:`~ppo_bootstrap.symmetry.Symmetry`), so ``data_augmentation_func`` is not called
(a warning says so). ``class_name`` ``"PPO"`` only; ``optimizer`` ``"adam"`` only;
``use_mixed_precision``, ``share_cnn_encoders`` ``False`` only; ``rnd_cfg`` ``None`` only;
``grad_reduce_bucket_mb`` is bookkeeping. ``PPOConfig.shuffle`` is rsl-rl-lib's ``"once"`` (one order
of the samples for all epochs of an update; :data:`RSL_RL_SHUFFLE`) where a config of this library's
own draws a new order each epoch. ``PPOConfig.timeout_bootstrap`` stays ``"exact"`` (rsl-rl-lib
bootstraps a timeout with ``V(s_t)``: ``"state_value"``): the one difference a translated config keeps.

Checkpoints (:func:`policy_state`, :func:`optimizer_state`): 4.x/5.x files hold ``actor_state_dict``
and ``critic_state_dict`` (``MLPModel``/``RNNModel``: ``obs_normalizer.*``, ``mlp.<i>.*``,
``distribution.std_param`` or ``distribution.log_std_param``, ``rnn.rnn.*``), 3.x files
``model_state_dict`` (an ``ActorCritic``: ``actor.<i>.*``, ``critic.<i>.*``, ``std`` or ``log_std``,
``actor_obs_normalizer.*``, ``critic_obs_normalizer.*``, ``memory_a.rnn.*``, ``memory_c.rnn.*``), both
with ``optimizer_state_dict`` (one Adam over the parameters in state-dict order, actor before
critic) and ``iter``. rsl-rl-lib's normalizer (``_mean``, ``_var``, ``_std`` ``[1, D]``, ``count``)
becomes this library's exact moments (``m2 = var * count``) with the same forward,
``(x - mean) / (std + 0.01)``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import warnings
from collections.abc import Mapping
from typing import Any

import torch

from ppo_bootstrap.checkpoint import CheckpointError, is_rsl_rl
from ppo_bootstrap.env import CRITIC, POLICY
from ppo_bootstrap.modules.actor_critic import ActorCritic, PolicyConfig
from ppo_bootstrap.ppo import PPOConfig, Shuffle

RSL_RL_PPO_DEFAULTS: dict[str, Any] = {
    "class_name": "PPO", "num_learning_epochs": 5, "num_mini_batches": 4, "clip_param": 0.2, "gamma": 0.99,
    "lam": 0.95, "value_loss_coef": 1.0, "entropy_coef": 0.01, "learning_rate": 0.001, "max_grad_norm": 1.0,
    "optimizer": "adam", "use_clipped_value_loss": True, "schedule": "adaptive", "desired_kl": 0.01,
    "normalize_advantage_per_mini_batch": False, "use_mixed_precision": False, "share_cnn_encoders": False,
    "rnd_cfg": None, "symmetry_cfg": None, "grad_reduce_bucket_mb": 25,
}
"""rsl-rl-lib 5.x's ``PPO`` defaults: what a field left out of a dict means there."""
RSL_RL_MODEL_DEFAULTS: dict[str, Any] = {
    "class_name": "MLPModel", "hidden_dims": (256, 256, 256), "activation": "elu", "obs_normalization": False,
    "distribution_cfg": None,
}
"""rsl-rl-lib 5.x's ``MLPModel`` defaults."""
RSL_RL_SHUFFLE: Shuffle = "once"
"""rsl-rl-lib's order of the samples over an update's epochs: one permutation per update, kept for
every epoch (its ``RolloutStorage.mini_batch_generator``); a translated config keeps it."""
RSL_RL_STD_RANGE = (1e-6, 1e6)
"""rsl-rl-lib's default clamp of the std, the one this library applies (its floor)."""

_PPO_SAME_NAME = ("num_learning_epochs", "num_mini_batches", "clip_param", "gamma", "lam", "value_loss_coef",
                  "use_clipped_value_loss", "entropy_coef", "learning_rate", "max_grad_norm",
                  "normalize_advantage_per_mini_batch")
_BOOKKEEPING = ("experiment_name", "run_name", "logger", "neptune_project", "wandb_project", "resume", "load_run",
                "load_checkpoint", "device", "multi_gpu")
_RUNNER_FIELDS = {"num_steps_per_env", "max_iterations", "save_interval", "seed", "check_for_nan", "obs_groups",
                  "clip_actions", "init_at_random_ep_len", "class_name", "torch_compile_mode",
                  "empirical_normalization", "policy", "actor", "critic", "algorithm", *_BOOKKEEPING}
_MODEL_FIELDS = {"class_name", "hidden_dims", "activation", "obs_normalization", "distribution_cfg", "stochastic",
                 "init_noise_std", "noise_std_type", "state_dependent_std", "rnn_type", "rnn_hidden_dim",
                 "rnn_num_layers", "cnn_cfg"}
_POLICY_FIELDS = {"class_name", "init_noise_std", "noise_std_type", "state_dependent_std", "actor_obs_normalization",
                  "critic_obs_normalization", "actor_hidden_dims", "critic_hidden_dims", "activation", "rnn_type",
                  "rnn_hidden_dim", "rnn_num_layers"}
_DISTRIBUTION_FIELDS = {"class_name", "init_std", "std_type", "std_range", "learn_std"}
_SYMMETRY_FIELDS = {"use_data_augmentation", "use_mirror_loss", "data_augmentation_func", "mirror_loss_coeff", "env"}
_ACTIVATIONS = {"elu": "elu", "relu": "relu", "tanh": "tanh", "selu": "selu", "silu": "silu", "swish": "silu"}


class RslRlConfigError(ValueError):
    """An rsl_rl agent configuration field that ppo_bootstrap cannot honour; one line naming it."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        super().__init__(f"rsl_rl config field {field}: {problem}")


# ------------------------------------------------------------------ reading configs
def _unset(value: Any) -> bool:
    """Isaac Lab's ``MISSING`` (``{}`` once ``to_dict()`` ran), or absent."""
    return value is dataclasses.MISSING or isinstance(value, type(dataclasses.MISSING)) or (
        isinstance(value, Mapping) and not value)


def _fields(cfg: Any, where: str) -> dict[str, Any]:
    """The fields of a config object (``to_dict()``, a dataclass, attributes) or a mapping, one level deep."""
    if isinstance(cfg, Mapping):
        return dict(cfg)
    if callable(getattr(cfg, "to_dict", None)):
        return dict(cfg.to_dict())
    if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
        return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}
    raise RslRlConfigError(where or "agent_cfg", f"expected a config object or a dict, got {type(cfg).__name__}")


def _check_names(fields: Mapping[str, Any], known: set[str], where: str) -> None:
    for name in fields:
        if name not in known:
            raise RslRlConfigError(f"{where}{name}", "unknown field (not one rsl-rl-lib 3.x-5.x defines for "
                                   "ppo_bootstrap to map; remove it or map it by hand)")


def _get(fields: Mapping[str, Any], name: str, where: str, defaults: Mapping[str, Any] | None = None) -> Any:
    """The value of ``name``; absent -> rsl-rl-lib's default; ``MISSING`` or no default -> refused."""
    value = fields.get(name, dataclasses.MISSING)
    if name not in fields and defaults is not None and name in defaults:
        return defaults[name]
    if _unset(value):
        raise RslRlConfigError(f"{where}{name}", "is not set")
    return value


def _only(fields: Mapping[str, Any], name: str, allowed: Any, where: str, why: str) -> None:
    """Refuse ``name`` unless it is ``allowed`` (rsl-rl-lib's default, which an absent field means)."""
    value = fields.get(name, allowed)
    if not _unset(value) and value != allowed:
        raise RslRlConfigError(f"{where}{name}", f"{value!r} is not supported ({why})")


def _class_name(value: Any) -> str:
    """``"PPO"`` of ``"PPO"``, ``"rsl_rl.algorithms:PPO"``, ``"rsl_rl.algorithms.PPO"`` or the class itself."""
    if isinstance(value, type):
        return value.__name__
    return str(value).replace(":", ".").rsplit(".", 1)[-1]


# ------------------------------------------------------------------ configs
def runner_config_kwargs(agent_cfg: Any) -> dict[str, Any]:
    """The :class:`~ppo_bootstrap.runner.RunnerConfig` keyword arguments that ``agent_cfg`` (an
    ``RslRlOnPolicyRunnerCfg`` or its dict) maps to; see the module docstring.

    Raises:
        RslRlConfigError: the first field that cannot be honoured, in one line naming it.
    """
    fields = _fields(agent_cfg, "")
    if "student" in fields or "teacher" in fields:
        raise RslRlConfigError("student" if "student" in fields else "teacher",
                               "distillation (DistillationRunner) is not supported; ppo_bootstrap trains with PPO")
    _check_names(fields, _RUNNER_FIELDS, "")
    runner_class = _class_name(fields.get("class_name", "OnPolicyRunner"))
    if runner_class != "OnPolicyRunner":
        raise RslRlConfigError("class_name", f"{runner_class!r} is not supported; ppo_bootstrap's Runner is an "
                               "on-policy PPO runner (OnPolicyRunner)")
    _only(fields, "torch_compile_mode", None, "", "ppo_bootstrap captures CUDA graphs instead; set it to None")
    env_obs_groups(fields)  # checked here, applied by the env adapter
    _check_clip_actions(fields.get("clip_actions"))
    if not isinstance(fields.get("init_at_random_ep_len", False), bool):
        raise RslRlConfigError("init_at_random_ep_len", f"must be True or False, got {fields['init_at_random_ep_len']!r}")
    policy = _policy_config(fields)
    algorithm = _fields(_get(fields, "algorithm", ""), "algorithm")
    kwargs: dict[str, Any] = {
        "num_steps_per_env": int(_get(fields, "num_steps_per_env", "")),
        "save_interval": int(_get(fields, "save_interval", "")),
        "policy": policy,
        # rsl-rl-lib 4.x/5.x (actor and critic models) clip each network's gradient; 3.x's one ActorCritic, both at once
        "ppo": _ppo_config(algorithm, policy, per_network=_unset(fields.get("policy", dataclasses.MISSING))),
    }
    for name, target in (("max_iterations", "max_iterations"), ("seed", "seed"), ("check_for_nan", "validate_env_output")):
        if not _unset(fields.get(name, dataclasses.MISSING)):
            kwargs[target] = fields[name] if name == "check_for_nan" else int(fields[name])
    if not isinstance(kwargs.get("validate_env_output", True), bool):
        raise RslRlConfigError("check_for_nan", f"must be True or False, got {kwargs['validate_env_output']!r}")
    return kwargs


def _check_clip_actions(clip: Any) -> None:
    if clip is None or _unset(clip):
        return
    if isinstance(clip, bool) or not isinstance(clip, (int, float)) or not 0 < clip < math.inf:
        raise RslRlConfigError("clip_actions", f"must be a positive number or None, got {clip!r}")


def env_obs_groups(agent_cfg: Any) -> dict[str, str] | None:
    """The env adapter's ``obs_groups`` (``{"policy": env_group, "critic": env_group}``) for the
    rsl_rl ``obs_groups`` of ``agent_cfg``; ``None`` where rsl-rl-lib's default applies (the
    adapters' default: ``"policy"``, and ``"critic"`` when the env has it). A critic that reads the
    actor's group gets no ``"critic"`` entry: the Runner's critic then reads ``"policy"``.

    Raises:
        RslRlConfigError: a set other than ``actor``/``policy`` and ``critic``, or one that
            concatenates several env groups (concatenate them in the env's observation group).
    """
    groups = _fields(agent_cfg, "").get("obs_groups", dataclasses.MISSING)
    if _unset(groups):
        return None
    if not isinstance(groups, Mapping):
        raise RslRlConfigError("obs_groups", f"must map observation sets to lists of env groups, got {groups!r}")
    chosen: dict[str, str] = {}
    for set_name, names in groups.items():
        role = {"actor": POLICY, "policy": POLICY, "critic": CRITIC}.get(set_name)
        if role is None or role in chosen:
            raise RslRlConfigError(f"obs_groups.{set_name}", "is not supported: the Runner reads one actor set "
                                   "('actor', or 'policy' in rsl-rl-lib 3.x) and one 'critic' set")
        names = [names] if isinstance(names, str) else list(names)
        if len(names) != 1 or not isinstance(names[0], str):
            raise RslRlConfigError(f"obs_groups.{set_name}", f"{names!r}: the Runner reads one env group per set; "
                                   "concatenate these terms in one observation group of the env")
        chosen[role] = names[0]
    if POLICY not in chosen:
        raise RslRlConfigError("obs_groups.actor", "is not set")
    if CRITIC not in chosen:
        if chosen[POLICY] != "policy":
            raise RslRlConfigError("obs_groups.critic", "is not set: name the critic's env group as well")
        return None
    if chosen[CRITIC] == chosen[POLICY]:
        del chosen[CRITIC]
    return chosen


def _network(fields: Mapping[str, Any], where: str, stochastic: bool) -> dict[str, Any]:
    """One ``RslRlMLPModelCfg``/``RslRlRNNModelCfg`` as ``{hidden, activation, obs_normalization,
    std (init, type) or None, recurrent (type, hidden, layers) or None}``."""
    _check_names(fields, _MODEL_FIELDS, where)
    model = _class_name(fields.get("class_name", "MLPModel"))
    if model not in ("MLPModel", "RNNModel"):
        raise RslRlConfigError(f"{where}class_name", f"{model!r} is not supported (MLPModel and RNNModel are)")
    if not _unset(fields.get("cnn_cfg", dataclasses.MISSING)):
        raise RslRlConfigError(f"{where}cnn_cfg", "CNN encoders are not supported")
    distribution = fields.get("distribution_cfg")
    std = None
    if distribution is not None and not _unset(distribution):
        std = _distribution(_fields(distribution, f"{where}distribution_cfg."), f"{where}distribution_cfg.")
    elif fields.get("stochastic") is True:  # the 4.x spelling
        state_dependent = fields.get("state_dependent_std", False) is True
        std_type = fields.get("noise_std_type", "scalar")
        std = _std(float(_get(fields, "init_noise_std", where)), std_type, state_dependent, f"{where}noise_std_type")
    if stochastic and std is None:
        raise RslRlConfigError(f"{where}distribution_cfg", "the actor needs a Gaussian output distribution")
    if not stochastic and std is not None:
        raise RslRlConfigError(f"{where}distribution_cfg", "a stochastic critic is not supported; set it to None")
    recurrent = None
    if model == "RNNModel":
        recurrent = (str(_get(fields, "rnn_type", where)).lower(), int(_get(fields, "rnn_hidden_dim", where)),
                     int(_get(fields, "rnn_num_layers", where)))
    return {"hidden": _hidden(_get(fields, "hidden_dims", where, RSL_RL_MODEL_DEFAULTS), f"{where}hidden_dims"),
            "activation": _get(fields, "activation", where, RSL_RL_MODEL_DEFAULTS),
            "obs_normalization": _get(fields, "obs_normalization", where, RSL_RL_MODEL_DEFAULTS),
            "std": std, "recurrent": recurrent}


def _distribution(fields: Mapping[str, Any], where: str) -> tuple[float, str]:
    _check_names(fields, _DISTRIBUTION_FIELDS, where)
    kind = _class_name(_get(fields, "class_name", where))
    if kind not in ("GaussianDistribution", "HeteroscedasticGaussianDistribution"):
        raise RslRlConfigError(f"{where}class_name", f"{kind!r} is not supported (GaussianDistribution and "
                               "HeteroscedasticGaussianDistribution are)")
    std_range = tuple(fields.get("std_range", RSL_RL_STD_RANGE))
    if len(std_range) != 2 or not all(math.isclose(a, b) for a, b in zip(std_range, RSL_RL_STD_RANGE)):
        raise RslRlConfigError(f"{where}std_range", f"{std_range!r} is not supported (only rsl-rl-lib's default "
                               f"{RSL_RL_STD_RANGE})")
    if fields.get("learn_std", True) is not True:
        raise RslRlConfigError(f"{where}learn_std", "a fixed std is not supported (the std is always learned)")
    return _std(float(_get(fields, "init_std", where)), fields.get("std_type", "scalar"),
                kind == "HeteroscedasticGaussianDistribution", f"{where}std_type")


def _std(init: float, std_type: Any, state_dependent: bool, where: str) -> tuple[float, str]:
    if std_type not in ("scalar", "log"):
        raise RslRlConfigError(where, f"must be 'scalar' or 'log', got {std_type!r}")
    if state_dependent:
        if std_type != "log":
            raise RslRlConfigError(where, "a state-dependent std in 'scalar' form is not supported; use 'log' "
                                   "(the actor outputs the log-std)")
        return init, "state_dependent"
    return init, std_type


def _hidden(dims: Any, where: str) -> tuple[int, ...]:
    dims = tuple(dims)
    if not dims or any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in dims):
        raise RslRlConfigError(where, f"must be positive layer widths, got {list(dims)} (-1 is not supported)")
    return dims


def _legacy_networks(fields: Mapping[str, Any], policy: Mapping[str, Any]) -> tuple[dict, dict]:
    """The actor and critic of a 3.x ``policy`` (``RslRlPpoActorCriticCfg``) in :func:`_network`'s form."""
    _check_names(policy, _POLICY_FIELDS, "policy.")
    kind = _class_name(policy.get("class_name", "ActorCritic"))
    if kind not in ("ActorCritic", "ActorCriticRecurrent"):
        raise RslRlConfigError("policy.class_name", f"{kind!r} is not supported (ActorCritic and "
                               "ActorCriticRecurrent are)")
    fallback = fields.get("empirical_normalization", dataclasses.MISSING)
    recurrent = None
    if kind == "ActorCriticRecurrent":
        recurrent = (str(_get(policy, "rnn_type", "policy.")).lower(), int(_get(policy, "rnn_hidden_dim", "policy.")),
                     int(_get(policy, "rnn_num_layers", "policy.")))
    std = _std(float(_get(policy, "init_noise_std", "policy.")), policy.get("noise_std_type", "scalar"),
               policy.get("state_dependent_std", False) is True, "policy.noise_std_type")
    out = []
    for role in ("actor", "critic"):
        normalization = policy.get(f"{role}_obs_normalization", dataclasses.MISSING)
        if _unset(normalization) and not _unset(fallback):
            normalization = fallback
        if _unset(normalization):
            raise RslRlConfigError(f"policy.{role}_obs_normalization", "is not set")
        out.append({"hidden": _hidden(_get(policy, f"{role}_hidden_dims", "policy."), f"policy.{role}_hidden_dims"),
                    "activation": _get(policy, "activation", "policy."), "obs_normalization": normalization,
                    "std": std if role == "actor" else None, "recurrent": recurrent})
    return out[0], out[1]


def _policy_config(fields: Mapping[str, Any]) -> PolicyConfig:
    legacy = fields.get("policy", dataclasses.MISSING)
    models = [fields.get(k, dataclasses.MISSING) for k in ("actor", "critic")]
    if not _unset(legacy):
        if not all(_unset(m) for m in models):
            raise RslRlConfigError("policy", "give either 'policy' (rsl-rl-lib 3.x) or 'actor' and 'critic', not both")
        actor, critic = _legacy_networks(fields, _fields(legacy, "policy."))
    else:
        if not _unset(fields.get("empirical_normalization", dataclasses.MISSING)):
            raise RslRlConfigError("empirical_normalization", "is deprecated and not read beside 'actor'/'critic'; "
                                   "set actor.obs_normalization and critic.obs_normalization")
        for name, model in zip(("actor", "critic"), models):
            if _unset(model):
                raise RslRlConfigError(name, "is not set (nor the older 'policy')")
        actor = _network(_fields(models[0], "actor."), "actor.", stochastic=True)
        critic = _network(_fields(models[1], "critic."), "critic.", stochastic=False)
    for role, net in (("actor", actor), ("critic", critic)):
        if str(net["activation"]).lower() not in _ACTIVATIONS:
            raise RslRlConfigError(f"{role}.activation", f"{net['activation']!r} is not supported "
                                   f"({sorted(_ACTIVATIONS)} are)")
    for key, label in (("activation", "activation"), ("obs_normalization", "obs_normalization"),
                       ("recurrent", "rnn_type/rnn_hidden_dim/rnn_num_layers")):
        if actor[key] != critic[key]:
            raise RslRlConfigError(f"critic.{label}", f"{critic[key]!r} differs from the actor's {actor[key]!r}; "
                                   "ppo_bootstrap's actor and critic share it")
    activation = _ACTIVATIONS[str(actor["activation"]).lower()]
    if not isinstance(actor["obs_normalization"], bool):
        raise RslRlConfigError("actor.obs_normalization", f"must be True or False, got {actor['obs_normalization']!r}")
    init_std, std_type = actor["std"]
    kwargs: dict[str, Any] = {"actor_hidden": actor["hidden"], "critic_hidden": critic["hidden"], "activation": activation,
                              "init_noise_std": init_std, "std_type": std_type,
                              "obs_normalization": actor["obs_normalization"]}
    if actor["recurrent"] is not None:
        rnn_type, hidden, layers = actor["recurrent"]
        if rnn_type not in ("gru", "lstm"):
            raise RslRlConfigError("actor.rnn_type", f"must be 'gru' or 'lstm', got {rnn_type!r}")
        kwargs.update(recurrent=rnn_type, rnn_hidden=hidden, rnn_layers=layers)
    try:
        return PolicyConfig(**kwargs)
    except ValueError as err:
        raise RslRlConfigError("actor", str(err)) from err


def _ppo_config(fields: Mapping[str, Any], policy: PolicyConfig, per_network: bool) -> PPOConfig:
    where = "algorithm."
    _check_names(fields, set(RSL_RL_PPO_DEFAULTS), where)
    algorithm = _class_name(fields.get("class_name", "PPO"))
    if algorithm != "PPO":
        why = "ppo_bootstrap trains with PPO" + ("; distillation has no counterpart" if algorithm == "Distillation" else "")
        raise RslRlConfigError(f"{where}class_name", f"{algorithm!r} is not supported ({why})")
    _only(fields, "rnd_cfg", None, where, "random network distillation is not part of ppo_bootstrap; set it to None")
    _only(fields, "optimizer", "adam", where, "ppo_bootstrap uses Adam")
    _only(fields, "use_mixed_precision", False, where, "the update runs in float32")
    _only(fields, "share_cnn_encoders", False, where, "there are no CNN encoders")
    kwargs = {name: _get(fields, name, where, RSL_RL_PPO_DEFAULTS) for name in _PPO_SAME_NAME}
    schedule = _get(fields, "schedule", where, RSL_RL_PPO_DEFAULTS)
    desired_kl = fields.get("desired_kl", RSL_RL_PPO_DEFAULTS["desired_kl"])
    if schedule not in ("adaptive", "fixed"):
        raise RslRlConfigError(f"{where}schedule", f"must be 'adaptive' or 'fixed', got {schedule!r}")
    if desired_kl is None:  # rsl-rl-lib adapts the learning rate only with a target KL
        schedule = "fixed"
    elif _unset(desired_kl):
        raise RslRlConfigError(f"{where}desired_kl", "is not set")
    else:
        kwargs["desired_kl"] = float(desired_kl)
    kwargs["schedule"] = schedule
    kwargs["clip_grad_per_network"] = per_network
    kwargs["shuffle"] = RSL_RL_SHUFFLE
    kwargs.update(_symmetry(fields.get("symmetry_cfg")))
    if kwargs["symmetry_augmentation"] or kwargs["symmetry_loss_coef"]:
        if policy.recurrent is not None:
            raise RslRlConfigError(f"{where}symmetry_cfg", "symmetry needs a feed-forward policy (as in rsl-rl-lib)")
    try:
        return PPOConfig(**kwargs)
    except ValueError as err:
        raise RslRlConfigError("algorithm", str(err)) from err


def _symmetry(cfg: Any) -> dict[str, Any]:
    where = "algorithm.symmetry_cfg."
    off = {"symmetry_augmentation": False, "symmetry_loss_coef": 0.0}
    if cfg is None or _unset(cfg):
        return off
    fields = _fields(cfg, where)
    _check_names(fields, _SYMMETRY_FIELDS, where)
    augment, mirror = fields.get("use_data_augmentation", False), fields.get("use_mirror_loss", False)
    for name, value in (("use_data_augmentation", augment), ("use_mirror_loss", mirror)):
        if not isinstance(value, bool):
            raise RslRlConfigError(f"{where}{name}", f"must be True or False, got {value!r}")
    coef = float(fields.get("mirror_loss_coeff", 0.0)) if mirror else 0.0
    if (augment or coef) and not _unset(fields.get("data_augmentation_func", dataclasses.MISSING)):
        warnings.warn(f"rsl_rl config field {where}data_augmentation_func is not called: ppo_bootstrap mirrors with "
                      "the env's 'symmetry' (a ppo_bootstrap.Symmetry)", UserWarning, stacklevel=4)
    return {"symmetry_augmentation": augment, "symmetry_loss_coef": coef}


# ------------------------------------------------------------------ checkpoints
_LAYOUT_5X = ("actor_state_dict", "critic_state_dict")
_LAYOUT_3X = "model_state_dict"


def layout(ckpt: Mapping[str, Any]) -> str | None:
    """``"4.x/5.x"`` or ``"3.x"`` for a file rsl-rl-lib's ``OnPolicyRunner.save`` wrote, else ``None``."""
    if not is_rsl_rl(ckpt):
        return None
    return "4.x/5.x" if _LAYOUT_5X[0] in ckpt else "3.x"


def _our_name(entry: str, key: str) -> str | None:
    """This library's name for rsl-rl-lib's ``key`` of state dict ``entry``, or ``None`` if none fits."""
    if entry in _LAYOUT_5X:
        net = "actor" if entry == "actor_state_dict" else "critic"
        prefixes = {"obs_normalizer.": f"{net}.normalizer.", "mlp.": f"{net}.head.", "rnn.rnn.": f"{net}.memory.rnn."}
        if net == "actor" and key in ("distribution.std_param", "distribution.log_std_param"):
            return "std_param"
    else:
        prefixes = {"actor_obs_normalizer.": "actor.normalizer.", "critic_obs_normalizer.": "critic.normalizer.",
                    "actor.": "actor.head.", "critic.": "critic.head.", "memory_a.rnn.": "actor.memory.rnn.",
                    "memory_c.rnn.": "critic.memory.rnn."}
        if key in ("std", "log_std"):
            return "std_param"
    for theirs, ours in prefixes.items():
        if key.startswith(theirs):
            return ours + key[len(theirs):]
    return None


def _entries(ckpt: Mapping[str, Any]) -> list[tuple[str, Mapping[str, torch.Tensor]]]:
    names = _LAYOUT_5X if layout(ckpt) == "4.x/5.x" else (_LAYOUT_3X,)
    return [(name, ckpt[name]) for name in names]


def _is_normalizer(key: str) -> bool:
    return ".normalizer." in key


def policy_state(path: str | os.PathLike, ckpt: Mapping[str, Any], policy: ActorCritic) -> dict[str, torch.Tensor]:
    """``policy``'s state dict filled from an rsl-rl-lib checkpoint ``ckpt`` (normalizers and std included).

    Raises:
        CheckpointError: one line naming the file and the first layer that does not fit ``policy``
            (shape, missing, unexpected, another std form, RND state).
    """
    if "rnd_state_dict" in ckpt:
        raise CheckpointError(path, "holds an RND network (rnd_state_dict): random network distillation is not "
                                    "supported")
    target = policy.state_dict()
    state: dict[str, torch.Tensor] = {}
    normalizers: dict[str, dict[str, torch.Tensor]] = {}
    for entry, tensors in _entries(ckpt):
        for key, value in tensors.items():
            ours = _our_name(entry, key)
            if ours == "std_param":
                _check_std_form(path, entry, key, policy.cfg.std_type)
            if ours is None or (ours not in target and not _is_normalizer(ours)):
                raise CheckpointError(path, f"{entry}[{key!r}] has no counterpart in this runner's network "
                                            f"({_form_hint(policy.cfg)})")
            if _is_normalizer(ours):
                prefix, name = ours.rsplit(".", 1)
                normalizers.setdefault(prefix, {})[name] = value
                continue
            if tuple(value.shape) != tuple(target[ours].shape):
                raise CheckpointError(path, f"{entry}[{key!r}] has shape {tuple(value.shape)}, this runner's layer "
                                            f"{ours} {tuple(target[ours].shape)}: it was trained with another "
                                            "network or task configuration")
            state[ours] = value.to(target[ours].dtype)
    for prefix, moments in normalizers.items():
        state.update(_normalizer_state(path, prefix, moments, target))
    missing = [k for k in target if k not in state]
    if missing:
        raise CheckpointError(path, f"has nothing for this runner's {missing[0]}"
                                    f"{f' (+{len(missing) - 1} more)' if len(missing) > 1 else ''} "
                                    f"({_form_hint(policy.cfg)})")
    return state


def _form_hint(cfg: PolicyConfig) -> str:
    return (f"obs_normalization={cfg.obs_normalization}, std_type={cfg.std_type!r}, recurrent={cfg.recurrent!r}: "
            "build the Runner with RunnerConfig.from_rsl_rl(<the agent config it was trained with>)")


def _check_std_form(path: str | os.PathLike, entry: str, key: str, std_type: str) -> None:
    theirs = "log" if key.endswith("log_std_param") or key == "log_std" else "scalar"
    if std_type != theirs:
        raise CheckpointError(path, f"{entry}[{key!r}] is a {theirs!r} std, this runner's std_type is {std_type!r}")


def _normalizer_state(path: str | os.PathLike, prefix: str, moments: Mapping[str, torch.Tensor],
                      target: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """rsl-rl-lib's ``_mean``/``_var``/``_std`` ``[1, D]`` and ``count`` as this library's moments."""
    if f"{prefix}.mean" not in target:
        raise CheckpointError(path, f"has an observation normalizer for the {prefix.split('.')[0]}, this runner "
                                    "has none (obs_normalization=False)")
    missing = [k for k in ("_mean", "_var", "_std", "count") if k not in moments]
    if missing:
        raise CheckpointError(path, f"its {prefix.split('.')[0]} normalizer lacks {missing}")
    width = target[f"{prefix}.mean"].shape
    for name in ("_mean", "_var", "_std"):
        if moments[name].numel() != width.numel():
            raise CheckpointError(path, f"its {prefix.split('.')[0]} normalizer {name} has shape "
                                        f"{tuple(moments[name].shape)}, this runner's {prefix}.mean {tuple(width)}")
    mean, var, std = (moments[k].reshape(width).to(torch.float64) for k in ("_mean", "_var", "_std"))
    count = moments["count"].to(torch.float64).reshape(())
    return {f"{prefix}.count": count, f"{prefix}.mean": mean, f"{prefix}.m2": var * count,
            f"{prefix}._mean32": mean.to(target[f"{prefix}._mean32"].dtype),
            f"{prefix}._std32": std.to(target[f"{prefix}._std32"].dtype)}


def optimizer_state(path: str | os.PathLike, ckpt: Mapping[str, Any], policy: ActorCritic,
                    optimizer: torch.optim.Optimizer) -> dict[str, Any] | None:
    """The PPO state (:meth:`ppo_bootstrap.ppo.PPO.load_state_dict`'s form) of the checkpoint's Adam,
    its moments moved to this policy's parameter order, or ``None`` when it has none.

    rsl-rl-lib's Adam runs over the parameters in state-dict order (actor before critic), so the
    ``i``-th parameter entry of the state dicts is its parameter ``i``.

    Raises:
        CheckpointError: the optimizer state does not fit those parameters.
    """
    saved = ckpt.get("optimizer_state_dict")
    if not isinstance(saved, Mapping) or not saved.get("param_groups"):
        return None
    theirs = [(entry, key) for entry, tensors in _entries(ckpt) for key in tensors
              if not _is_normalizer(_our_name(entry, key) or "")]
    index = {name: i for i, (name, _) in enumerate(policy.named_parameters())}
    saved_ids = [i for group in saved["param_groups"] for i in group["params"]]
    if len(saved_ids) != len(theirs) or len(theirs) != len(index):
        raise CheckpointError(path, f"its optimizer holds {len(saved_ids)} parameters, its networks "
                                    f"{len(theirs)}, this runner's {len(index)}")
    state = {}
    for saved_id, (entry, key) in zip(saved_ids, theirs):
        if saved_id in saved["state"]:
            state[index[_our_name(entry, key)]] = dict(saved["state"][saved_id])
    # this optimizer's own groups (hyper-parameters, a device learning rate); PPO sets the file's rate
    groups = optimizer.state_dict()["param_groups"]
    return {"optimizer": {"state": state, "param_groups": groups}, "learning_rate": float(saved["param_groups"][0]["lr"])}
