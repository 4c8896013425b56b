"""``Runner`` beside rsl-rl-lib's ``OnPolicyRunner`` on a cheap Gymnasium task, over seeds: the agent
config both take and the table of the returns they end at (``benchmarks/rsl_rl_learning.py`` runs
them). A record is one trainer at one seed: ``{"trainer", "seed", "env", "time_limit", "num_envs",
"steps", "iterations", "rows"}``, a row per iteration ``{"it", "wall_s", "return", "length", "ended",
"timeouts", "lr"}`` measured on the env's side (:class:`~isaac_adapter.app.bench.common.EpisodeMeter`),
but the learning rate, the trainer's. Also what one update reads and moves under each order of the
samples (:func:`read_and_moved`, which ``benchmarks/shuffle_kl.py`` runs)."""

from __future__ import annotations

import copy
import dataclasses
import math
import statistics
from typing import Any

import torch
from ppo_bootstrap.env import POLICY, critic_obs
from ppo_bootstrap.ppo import PPO, SHUFFLES, _gaussian_kl

from isaac_adapter.app.bench.common import RSL_RL, last_mean, learning_rate_cell


def agent_config(seed: int, steps: int, iterations: int) -> dict[str, Any]:
    """The rsl-rl-lib 5.x agent config both trainers take, in its ``to_dict()`` layout: Isaac Lab's
    G1 flat recipe (clipped losses, 5 epochs x 4 mini-batches, adaptive KL 0.01, no observation
    normalization), with small networks and the learning rate of a Gymnasium locomotion task."""
    mlp = {"class_name": "MLPModel", "hidden_dims": [64, 64], "activation": "elu", "obs_normalization": False}
    return {
        "class_name": "OnPolicyRunner", "seed": seed, "num_steps_per_env": steps, "max_iterations": iterations,
        "save_interval": 10**9, "experiment_name": "rsl_rl_learning", "clip_actions": None, "check_for_nan": True,
        "multi_gpu": None, "obs_groups": {"actor": ["policy"], "critic": ["policy"]},
        "actor": {**mlp, "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0, "std_type": "scalar"}},
        "critic": dict(mlp),
        "algorithm": {"class_name": "PPO", "value_loss_coef": 1.0, "use_clipped_value_loss": True, "clip_param": 0.2,
                      "entropy_coef": 0.0, "num_learning_epochs": 5, "num_mini_batches": 4, "learning_rate": 3e-4,
                      "schedule": "adaptive", "gamma": 0.99, "lam": 0.95, "desired_kl": 0.01, "max_grad_norm": 1.0,
                      "normalize_advantage_per_mini_batch": False, "rnd_cfg": None, "symmetry_cfg": None},
    }


def learning_table(records: list[dict[str, Any]], window: int) -> str:
    """Per trainer: the return it ended at at each seed (the mean of its last ``window`` rows'
    returns, :func:`~isaac_adapter.app.bench.common.last_mean`; a row where no episode ended has
    none), their mean and sample standard deviation, the episodes ended over its runs and of them
    by the time limit, the geometric mean of the learning rate over its rows (``-``: records that
    kept none) and the median seconds per iteration (each run's first left out). Then, for each trainer against
    rsl-rl-lib (or of two trainers, the first against the second), a line: the difference of their
    means, its standard error ``sqrt(s1^2 / n1 + s2^2 / n2)`` and their ratio (Welch's t: within
    about 2, the seeds do not tell the trainers apart)."""
    by: dict[str, list[dict[str, Any]]] = {}
    for rec in sorted(records, key=lambda r: (r["trainer"], r["seed"])):
        by.setdefault(rec["trainer"], []).append(rec)
    first = records[0]
    limit = f", time limit {first['time_limit']} steps" if "time_limit" in first else ""
    out = [f"{first['env']}{limit}, {first['num_envs']} envs x {first['steps']} steps, {first['iterations']} iterations; "
           f"return: the mean over the last {window} iterations of the episodes that ended in each",
           "| trainer | seeds | return at each seed | mean | std | episodes ended | by the time limit | learning rate | s/it |",
           "|---|---|---|---|---|---|---|---|---|"]
    spread: dict[str, tuple[float, float, int]] = {}
    for name, recs in by.items():
        ends = [last_mean(r["rows"], "return", window) for r in recs]
        mean, std = statistics.fmean(ends), statistics.stdev(ends) if len(ends) > 1 else math.nan
        spread[name] = (mean, std, len(ends))
        ended = sum(x["ended"] for r in recs for x in r["rows"])
        timeouts = sum(x["timeouts"] for r in recs for x in r["rows"])
        wall = statistics.median(x["wall_s"] for r in recs for x in r["rows"][1:])
        rate = learning_rate_cell([x for r in recs for x in r["rows"]])
        out.append(f"| {name} | {', '.join(str(r['seed']) for r in recs)} | {', '.join(f'{e:.0f}' for e in ends)} | "
                   f"{mean:.0f} | {std:.0f} | {ended:,} | {timeouts:,} | {rate} | {wall:.3f} |")
    names = list(spread)
    reference = RSL_RL if RSL_RL in spread else (names[1] if len(names) == 2 else None)
    for a in names if reference is not None else []:
        if a != reference:
            (m1, s1, n1), (m2, s2, n2) = spread[a], spread[reference]
            se = math.sqrt(s1 * s1 / n1 + s2 * s2 / n2)
            out.append(f"{a} - {reference}: {m1 - m2:+.0f}, standard error {se:.0f}, t = {(m1 - m2) / se:+.2f}")
    return "\n".join(out)


@torch.no_grad()
def moved_kl(learner: PPO) -> float:
    """The mean KL ``KL(collecting policy || learner's policy)`` over every sample of its rollout."""
    data = learner.storage.data.reshape(-1)
    obs = data["obs"]
    dist, _ = learner.policy.evaluate(obs[POLICY], critic_obs(obs), (None, None), None)
    return float(_gaussian_kl(data["action_mean"], data["action_std"], dist.mean, dist.stddev).mean())


def read_and_moved(learner: PPO, seed: int) -> dict[str, tuple[float, float]]:
    """Per order: ``(KL the schedule reads, KL the update moved)`` of one update of copies of
    ``learner`` on its rollout, at its learning rate held fixed, the orders drawn from ``seed``."""
    out = {}
    for shuffle in SHUFFLES:
        twin = copy.deepcopy(learner)
        twin.cfg = dataclasses.replace(twin.cfg, schedule="fixed", shuffle=shuffle)
        stats = PPO.update(twin, torch.Generator().manual_seed(seed))  # the class's, whatever wraps the learner's
        out[shuffle] = (stats["policy/kl"], moved_kl(twin))
    return out
