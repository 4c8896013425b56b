"""Evaluate a G1 walking checkpoint: falls judged apart from training termination, gait acceptance,
a threshold sweep over one set of rollouts, an optional episode dataset, and plots.

    python examples/g1_eval.py runs/g1_walk/model_1500.pt
    python examples/g1_eval.py runs/g1_walk/model_1500.pt --sweep 0.60,0.50,0.45 --dataset eval.parquet
    python examples/g1_eval.py zero --horizon-s 3 --num-envs 8      # the zero-action stand test
    python examples/g1_eval.py model.pt --backend warp --device cuda --num-envs 1024 --command env

Prints the evaluation summary, a per-env table and the sweep table; writes survival.png,
causes.png, first_crossings.png and foot_contacts.png into --out-dir.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

# running the file directly puts examples/ on sys.path, not the repository root
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from isaac_adapter.evaluation import (  # noqa: E402
    ActorCriticPolicy, EpisodeDatasetWriter, EvalConfig, Evaluator, EvalReport, GaitThresholds, zero_policy,
)
from isaac_adapter.tasks.g1_walk import G1WalkConfig, G1WalkEnv  # noqa: E402
from isaac_adapter.tasks.g1_walk.config import walk_config  # noqa: E402
from isaac_adapter.tasks.g1_walk.env import BACKENDS  # noqa: E402
from isaac_adapter.evaluation.g1_probe import G1WalkProbe, evaluation_thresholds  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint", help="a Runner checkpoint model_<it>.pt, or 'zero' for the zero-action policy")
    parser.add_argument("--sweep", default="0.60,0.50,0.45", help="evaluation heights (m) judged on the same rollouts")
    parser.add_argument("--dataset", default=None, help="write every episode of the rollouts to this Parquet file")
    parser.add_argument("--num-envs", type=int, default=32)
    parser.add_argument("--horizon-s", type=float, default=15.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--command", default="0.5,0.0,0.0", help="v_x,v_y,w_z held by every env; 'env' keeps the env's seeded commands")
    parser.add_argument("--eval-height", type=float, default=None, help="eval_success_height (m); default: the task's")
    parser.add_argument("--out-dir", default="eval_out")
    parser.add_argument("--model-variant", default=None, help="G1 model variant (default: the task's)")
    parser.add_argument("--physics-threads", type=int, default=0, help="0: every core")
    parser.add_argument("--backend", choices=sorted(BACKENDS), default="mujoco",
                        help="physics: mujoco (CPU) or warp (MuJoCo Warp, on --device)")
    parser.add_argument("--device", default="cpu", help="where the env (warp) and the policy run")
    parser.add_argument("--env-rows", type=int, default=16, help="per-env rows printed")
    parser.add_argument("--no-plots", action="store_true")
    parser.add_argument("--gait-clock", action="store_true", default=None,
                        help="the task variant with the gait clock (default: the checkpoint's task)")
    parser.add_argument("--progress", action="store_true", help="show the evaluator's progress")
    parser.add_argument("--summary-json", default=None, help="write the headline numbers and the verdict here")
    return parser.parse_args(argv)


def evaluate_checkpoint(
    checkpoint: str,
    num_envs: int = 32,
    horizon_s: float = 15.0,
    sweep_heights: tuple[float, ...] = (0.60, 0.50, 0.45),
    commands: tuple[float, float, float] | None = (0.5, 0.0, 0.0),
    seed: int = 0,
    dataset: str | None = None,
    eval_height: float | None = None,
    gait: GaitThresholds | None = None,
    env_cfg: G1WalkConfig | None = None,
    backend: str = "mujoco",
    progress: bool | None = False,
) -> EvalReport:
    """The Python API behind the command line: build the env, load the policy, evaluate.

    The policy runs where the env's observations are (``env_cfg.device`` for Warp).
    """
    cfg = env_cfg or G1WalkConfig(num_envs=num_envs, seed=seed)
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


@torch.no_grad()
def main(argv: list[str] | None = None) -> EvalReport:
    args = parse_args(argv)
    commands = None if args.command == "env" else tuple(float(v) for v in args.command.split(","))
    if commands is not None and len(commands) != 3:
        raise SystemExit(f"--command needs v_x,v_y,w_z, got {args.command!r}")
    heights = tuple(float(v) for v in args.sweep.split(",") if v.strip()) if args.sweep else ()
    cfg_kwargs = {"num_envs": args.num_envs, "seed": args.seed, "physics_threads": args.physics_threads,
                  "device": args.device if args.backend == "warp" else "cpu"}
    if args.model_variant:
        cfg_kwargs["model_variant"] = args.model_variant
    if args.gait_clock is None and args.checkpoint != "zero":
        from isaac_adapter.tasks.registry import checkpoint_walk_config

        env_cfg = checkpoint_walk_config(args.checkpoint, **cfg_kwargs)
    else:
        env_cfg = walk_config(bool(args.gait_clock), **cfg_kwargs)
    report = evaluate_checkpoint(
        args.checkpoint, args.num_envs, args.horizon_s, heights, commands, args.seed, args.dataset,
        args.eval_height, env_cfg=env_cfg,
        backend=args.backend, progress=args.progress or None,
    )
    print(report.format(args.env_rows))
    if args.summary_json:
        summary = {"checkpoint": args.checkpoint, "backend": args.backend, "command": args.command,
                   "horizon_s": args.horizon_s, "seed": args.seed, **report.summary(), "verdict": report.verdict()}
        with open(args.summary_json, "w") as f:
            json.dump(summary, f, indent=1)
    if args.dataset:
        print(f"episodes written to {args.dataset}")
    if not args.no_plots:
        from isaac_adapter.evaluation.plots import plot_report

        for path in plot_report(report, args.out_dir):
            print(f"wrote {path}")
    return report


if __name__ == "__main__":
    main()
