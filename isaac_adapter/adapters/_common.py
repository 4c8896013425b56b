"""Helpers shared by all adapters: unwrapping, observation groups, final-observation bookkeeping.

The episode rules themselves (what ends an episode, when a time-out is terminal) live in
:mod:`ppo_bootstrap.episode`; the step shared by Isaac Lab and mjlab lives in
:mod:`isaac_adapter.adapters.base`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from ppo_bootstrap.env import CRITIC, POLICY, ObsGroups
from ppo_bootstrap.episode import EpisodeProtocolError

# Where the protocol's groups are looked up when no ``obs_groups`` mapping is given, in order.
# Isaac Lab names its groups "policy"/"critic"; mjlab (and rsl_rl 3+ style configs) use "actor"/"critic".
DEFAULT_GROUP_CANDIDATES: dict[str, tuple[str, ...]] = {
    POLICY: ("policy", "actor"),
    CRITIC: ("critic", "privileged"),
}


def unwrap(env: Any) -> Any:
    """The innermost env: follows ``.unwrapped`` (gymnasium wrappers, Isaac Lab / mjlab RL wrappers)."""
    seen = set()
    while hasattr(env, "unwrapped") and id(env) not in seen:
        seen.add(id(env))
        inner = env.unwrapped
        if inner is env:
            break
        env = inner
    return env


def resolve_groups(available: Mapping[str, Any], obs_groups: Mapping[str, str] | None) -> dict[str, str]:
    """Map protocol group (``"policy"``, ``"critic"``) -> the env's group name.

    With ``obs_groups=None`` the policy group is ``"policy"`` or else ``"actor"``, and the critic
    group ``"critic"`` when the env has one. Groups the mapping does not name are dropped.
    """
    if obs_groups is not None:
        mapping = dict(obs_groups)
        if POLICY not in mapping:
            raise ValueError(f"obs_groups must map {POLICY!r} to an env group, got {mapping}")
        unknown = set(mapping) - {POLICY, CRITIC}
        if unknown:
            raise ValueError(f"obs_groups keys must be {POLICY!r} and optionally {CRITIC!r}, got {sorted(unknown)}")
        missing = {k: v for k, v in mapping.items() if v not in available}
        if missing:
            raise ValueError(f"obs_groups {missing} name groups the env does not have; it has {sorted(available)}")
        return mapping
    mapping = {}
    for group, candidates in DEFAULT_GROUP_CANDIDATES.items():
        for name in candidates:
            if name in available:
                mapping[group] = name
                break
    if POLICY not in mapping:
        raise ValueError(
            f"the env has no {POLICY!r} (or 'actor') observation group, only {sorted(available)}; "
            "pass obs_groups={'policy': <name>, 'critic': <name>}"
        )
    return mapping


def select_groups(obs: Mapping[str, Any], mapping: Mapping[str, str], what: str = "obs") -> ObsGroups:
    """Pick and rename the mapped groups; every one must be a single tensor ``[N, ...]``."""
    out = {}
    for group, name in mapping.items():
        if name not in obs:
            raise EpisodeProtocolError(f"{what} lacks the observation group {name!r} (has {sorted(obs)})")
        value = obs[name]
        if not isinstance(value, torch.Tensor):
            raise ValueError(
                f"{what}[{name!r}] is a {type(value).__name__}, not a tensor; concatenate the group's terms "
                "(Isaac Lab / mjlab: ObservationGroupCfg.concatenate_terms=True)"
            )
        out[group] = value
    return out


def empty_rows(obs: ObsGroups) -> ObsGroups:
    """``[0, ...]`` tensors shaped like ``obs``: the final observations of a step where nothing ended."""
    return {k: v[:0] for k, v in obs.items()}


def shares_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors are backed by the same storage (so writing one overwrites the other)."""
    try:
        return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() and a.numel() > 0
    except (RuntimeError, NotImplementedError):  # e.g. sparse or meta tensors
        return False


def log_scalars(log: Any) -> dict[str, Any]:
    """The scalar entries of an Isaac Lab / mjlab ``extras["log"]`` dict, for ``StepResult.info["log"]``."""
    if not isinstance(log, Mapping):
        return {}
    out = {}
    for key, value in log.items():
        if isinstance(value, torch.Tensor):
            if value.numel() == 1:
                out[key] = value.reshape(())
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = value
    return out

