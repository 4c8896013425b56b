"""A G1 policy checkpoint widened to see more observation frames (``G1WalkConfig.policy_obs_frames``).

To fine-tune a trained one-frame policy with history, its actor is given the new frames' inputs with
zero weight: on a stacked observation whose current frame is the one it saw before, the widened
policy acts exactly as the original did, and training then learns what the past frames are worth.
The actor's normalizer keeps its per-feature statistics for the frames it had and repeats its oldest
frame's for the new ones (a past frame is distributed as the current one). The critic sees the
current frame alone and is unchanged.

    python scripts/widen_policy_frames.py docs/checkpoints/g1_robust_ft_it2200.pt runs/ft_k3.pt --frames 3
    python examples/g1_walk.py --checkpoint runs/ft_k3.pt ...        # fine-tune it (the file records 3 frames)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

ACTOR_NORMALIZER = "actor.normalizer."
ACTOR_HEAD = "actor.head."
# what a policy-only file keeps (the optimizer, env and RNG states of a full one are sized for the old input)
POLICY_ONLY = ("policy", "config", "iteration", "total_steps", "normalizers_warm", "task")


def widen_policy_frames(ckpt: Mapping[str, Any], frames: int) -> dict[str, Any]:
    """The policy-only checkpoint of ``ckpt``'s policy fed ``frames`` observation frames.

    ``ckpt``: a G1 checkpoint (``task/env`` records ``policy_obs_frames``, 1 when absent) of a
    feed-forward policy. Its actor's first layer ``[H, K * D]`` (K frames of width D, newest first)
    becomes ``[H, frames * D]`` with zero columns appended; each actor normalizer vector ``[K * D]``
    becomes ``[frames * D]``, its oldest frame's slice repeated. The result records ``frames`` in
    ``task/env/policy_obs_frames``; :func:`ppo_bootstrap.checkpoint.save_atomic` writes it with its checksum.

    Raises:
        ValueError: one line: no G1 task recorded, a recurrent policy, or ``frames`` not more than
            the checkpoint's own.
    """
    env = (ckpt.get("task") or {}).get("env")
    if not isinstance(env, Mapping):
        raise ValueError("the checkpoint records no G1 task (task/env): only a G1-Walk checkpoint has frames to widen")
    old = int(env.get("policy_obs_frames", 1))
    if not (int(frames) == frames and frames > old):
        raise ValueError(f"--frames {frames}: the checkpoint's policy sees {old} frame(s) already; give a larger count")
    if (ckpt.get("config") or {}).get("policy", {}).get("recurrent"):
        raise ValueError("the checkpoint's policy is recurrent: it keeps its own memory, and frames widen a "
                         "feed-forward policy only")
    policy = dict(ckpt["policy"])
    first = next(k for k in policy if k.startswith(ACTOR_HEAD) and k.endswith(".weight"))  # the actor's input layer
    weight = policy[first]
    width, extra = weight.shape[1] // old, frames - old
    policy[first] = torch.cat([weight, weight.new_zeros(weight.shape[0], extra * width)], dim=1)
    for key in [k for k in policy if k.startswith(ACTOR_NORMALIZER) and policy[k].dim() == 1]:
        stats = policy[key]
        policy[key] = torch.cat([stats, stats[-width:].repeat(extra)])
    out = {k: ckpt[k] for k in POLICY_ONLY if k in ckpt}
    out["policy"] = policy
    out["task"] = {**ckpt["task"], "env": {**env, "policy_obs_frames": int(frames)}}
    return out
