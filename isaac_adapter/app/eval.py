"""``eval``: a G1 walking checkpoint judged as the acceptance judges it: falls judged apart from training
termination, gait acceptance, a threshold sweep over one set of rollouts, an optional episode
dataset, and plots.

    python -m isaac_adapter.app eval logs/G1-Walk-Clock-v0/<run>/model_1500.pt
    python -m isaac_adapter.app eval model.pt --sweep 0.60,0.50,0.45 --dataset eval.parquet
    python -m isaac_adapter.app eval zero --horizon_s 3 --num_envs 8      # the zero-action stand test
    python -m isaac_adapter.app eval model.pt --sim warp --device cuda --num_envs 1024 --command env

Prints the evaluation summary, a per-env table and the sweep table; writes survival.png,
causes.png, first_crossings.png and foot_contacts.png into ``--out_dir`` (default: ``eval/`` in the
checkpoint's run folder).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from ppo_bootstrap import checkpoint

from isaac_adapter.app.args import EVAL, EVAL_ENVS, Args, numbers
from isaac_adapter.evaluation import (
    ActorCriticPolicy, EpisodeDatasetWriter, EvalConfig, Evaluator, EvalReport, GaitThresholds, zero_policy,
)
from isaac_adapter.evaluation.sweep import SWEEP_HEIGHTS
from isaac_adapter.tasks import registry
from isaac_adapter.tasks.registry import UsageError


def evaluate_checkpoint(
    checkpoint: str,
    num_envs: int = EVAL_ENVS,
    horizon_s: float = EvalConfig.horizon_s,
    sweep_heights: tuple[float, ...] = SWEEP_HEIGHTS,
    commands: tuple[float, float, float] | None = EvalConfig.commands,
    seed: int = 0,
    dataset: str | None = None,
    eval_height: float | None = None,
    gait: GaitThresholds | None = None,
    env_cfg: Any = None,
    backend: str = "mujoco",
    progress: bool | None = False,
) -> EvalReport:
    """The Python API behind the command line: build the env, load the policy, evaluate.

    The policy runs where the env's observations are (``env_cfg.device`` for Warp).
    """
    from isaac_adapter.evaluation.g1_probe import G1WalkProbe, evaluation_thresholds, judged_walk_config
    from isaac_adapter.tasks.g1_walk import G1WalkConfig, G1WalkEnv

    cfg = env_cfg or G1WalkConfig(num_envs=num_envs, seed=seed)
    # the judge's lines alone call falls: a training rule above the lowest ends nothing in the rollout
    cfg = judged_walk_config(cfg, cfg.eval_success_height if eval_height is None else eval_height, *sweep_heights)
    env = G1WalkEnv(cfg, backend=backend)
    probe = G1WalkProbe(env)
    eval_rule = evaluation_thresholds(cfg, eval_height) if eval_height is not None else None
    evaluator = Evaluator(probe, EvalConfig(horizon_s=horizon_s, seed=seed, commands=commands,
                                            eval_thresholds=eval_rule, gait=gait or GaitThresholds()),
                          progress=progress)
    if checkpoint == "zero":
        policy = zero_policy(env.num_actions)
    else:
        obs = env.reset()
        policy = ActorCriticPolicy.from_checkpoint(checkpoint, obs, env.num_actions)
    recorder = None
    if dataset:
        recorder = EpisodeDatasetWriter(dataset, env.num_envs, probe.dt, groups=("policy", "critic"),
                                        cause_names=probe.cause_names,
                                        metadata={"checkpoint": checkpoint, "seed": seed, "horizon_s": horizon_s})
    try:
        report = evaluator.evaluate(policy, sweep_heights=sweep_heights, recorder=recorder)
    except BaseException:
        if recorder is not None:
            recorder.abort()
        raise
    if recorder is not None:
        recorder.close()
    return report


def eval_sim(args: Args) -> tuple[str, str]:
    """``(backend, device)`` of the evaluation env: ``auto`` is MuJoCo on the CPU, as the acceptance runs."""
    from isaac_adapter.tasks.g1_walk.env import BACKENDS

    sim = "mujoco" if args.sim == "auto" else args.sim
    if sim not in BACKENDS:
        raise UsageError(f"{args.flag('sim')} {sim}: eval steps the G1-Walk env on {' or '.join(sorted(BACKENDS))}")
    device = "cpu" if sim == "mujoco" else ("cuda" if args.device == "auto" else args.device)
    if sim != "mujoco" and device.startswith("cuda") and not torch.cuda.is_available():
        raise UsageError(f"--device {device} but torch sees no CUDA device here; use --device cpu")
    return sim, device


@torch.no_grad()
def evaluate(args: Args) -> EvalReport:
    """The ``eval`` subcommand on parsed flags: print the report, write the plots and files asked for."""
    from isaac_adapter.app.play import checkpoint_path, output_dir
    from isaac_adapter.tasks.g1_walk.config import walk_config

    commands = None if args.command == "env" else numbers(args.command, 3, args.flag("command"), "0.5,0.0,0.0")
    heights = numbers(args.sweep, None, args.flag("sweep"), "0.60,0.50,0.45") if args.sweep else ()
    backend, device = eval_sim(args)
    num_envs = args.num_envs or EVAL_ENVS
    cfg_kwargs = {"num_envs": num_envs, "seed": args.seed, "physics_threads": args.physics_threads, "device": device}
    if args.model_variant:
        cfg_kwargs["model_variant"] = args.model_variant
    zero = args.path == "zero"
    ckpt = None if zero else checkpoint_path(args, args.path)
    if args.task is None and not zero:
        env_cfg = registry.checkpoint_walk_config(str(ckpt), **cfg_kwargs)
        experiment = registry.checkpoint_task(checkpoint.read(ckpt), str(ckpt))[0].id
    else:  # the task asked for (the zero-action policy: G1-Walk-v0's, the task without the clock)
        spec = registry.get_task(args.task or "G1-Walk-v0")
        if not spec.is_g1_walk:
            raise UsageError(f"--task {spec.id}: eval judges the G1-Walk tasks")
        env_cfg = walk_config(preset=spec.config_preset, **cfg_kwargs)
        experiment = spec.id
    out = output_dir(args, ckpt, args.experiment_name or experiment) if ckpt is not None else \
        Path(args.log_root) / (args.experiment_name or experiment) / "zero"
    report = evaluate_checkpoint(
        "zero" if zero else str(ckpt), num_envs, args.horizon_s, heights, commands, args.seed, args.dataset,
        args.eval_height, env_cfg=env_cfg, backend=backend, progress=args.progress or None,
    )
    print(report.format(args.env_rows))
    if args.summary_json:
        summary = {"checkpoint": args.path or str(ckpt), "backend": backend, "command": args.command,
                   "horizon_s": args.horizon_s, "seed": args.seed, **report.summary(), "verdict": report.verdict()}
        with open(args.summary_json, "w") as f:
            json.dump(summary, f, indent=1)
    if args.dataset:
        print(f"episodes written to {args.dataset}")
    if not args.no_plots:
        from isaac_adapter.evaluation.plots import plot_report

        for path in plot_report(report, args.out_dir or out / "eval"):
            print(f"wrote {path}")
    return report


def main(argv: list[str] | None = None) -> EvalReport:
    """``argv`` as the ``eval`` subcommand's flags (``g1_walk.py --eval`` forwards here)."""
    import sys

    from isaac_adapter.app.cli import parse

    return evaluate(parse(EVAL, sys.argv[1:] if argv is None else argv))
