"""G1 learning curve as the evaluator sees it: every checkpoint of a training run, judged alike.

    python benchmarks/g1_acceptance.py runs/g1 --every 200 --backend warp --device cuda --num-envs 1024
    python benchmarks/g1_acceptance.py runs/g1 --iterations 1500 --command env     # the mixed command set
    python benchmarks/g1_acceptance.py docs/checkpoints/g1_clock_it1296.pt --gait-clock   # one checkpoint file
    python benchmarks/g1_acceptance.py CHECKPOINT --command env --solver-iterations 100 --ls-iterations 50  # another solver budget
    python benchmarks/g1_acceptance.py CHECKPOINT --command env env.randomization.kp_scale=[1.1,1.1]     # one physics change

For each ``model_<it>.pt`` of the run directory (every ``--every`` iterations, or the ones named) it
runs one seeded evaluation (fixed command 0.5 m/s by default, 15 s horizon, falls judged at
``eval_success_height``) and prints a table: iteration, env steps and training seconds to that
checkpoint (from the run's ``metrics.jsonl``: the sum of the Runner's per-iteration collection and
update times, so start-up and kernel compilation are not in it), fall rate, the gait means of the
envs commanded to walk and the policy verdict; then a line for each of the first five envs that
fell (its command, the cause and time, and the training rule's judgement of it). ``--json`` keeps
the rows, every fall included. ``env.KEY=VALUE`` overrides change the task the checkpoint recorded,
as on the training command line: a randomization range of one value (``[1.1,1.1]``) sets that
parameter in every env, so a checkpoint can be judged under one physics change at a time.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import _common  # noqa: F401  (puts the repository root on sys.path)
from _common import add_solver_args, solver_overrides
import torch

from ppo_bootstrap import checkpoint
from ppo_bootstrap.runner import read_metrics

from isaac_adapter.app.overrides import OverrideError, apply_overrides, parse_override
from isaac_adapter.evaluation import ActorCriticPolicy, EvalConfig, Evaluator, EvalReport
from isaac_adapter.evaluation.gait import walking_means
from isaac_adapter.evaluation.judge import FALL
from isaac_adapter.tasks.g1_walk import G1WalkEnv
from isaac_adapter.tasks.g1_walk.causes import CAUSE_NAMES
from isaac_adapter.tasks.registry import checkpoint_walk_config
from isaac_adapter.evaluation.g1_probe import G1WalkProbe, judged_walk_config


def checkpoints(run_dir: Path, every: int, named: list[int] | None) -> list[tuple[int, Path]]:
    if run_dir.is_file():  # one checkpoint file, e.g. a shipped one
        return [(int(checkpoint.read(run_dir)["iteration"]), run_dir)]
    found = {int(m.group(1)): p for p in run_dir.glob("model_*.pt") if (m := re.fullmatch(r"model_(\d+)\.pt", p.name))}
    if named:
        missing = [it for it in named if it not in found]
        if missing:
            raise SystemExit(f"no checkpoint for iterations {missing} in {run_dir} (have {sorted(found)})")
        return [(it, found[it]) for it in named]
    return [(it, p) for it, p in sorted(found.items()) if it % every == 0 or it == max(found)]


def falls(report: EvalReport) -> list[dict]:
    """Who fell under the evaluation thresholds: env, its command, cause and time, and how the
    training rule judged the same rollout (a posture dip below 0.60 m is not a collapse)."""
    out = []
    for env in torch.nonzero(report.judgement.outcome == FALL).flatten().tolist():
        judged = []
        for judgement in (report.judgement, report.training_judgement):
            if judgement is None or int(judgement.outcome[env]) != FALL:
                judged.append(None)
                continue
            judged.append((CAUSE_NAMES[int(judgement.cause[env])], (int(judgement.end_step[env]) + 1) * report.trace.dt))
        (cause, time_s), training = judged
        out.append({"env": env, "command": [round(v, 3) for v in report.trace.command[0, env].tolist()],
                    "cause": cause, "time_s": time_s,
                    "training_rule": "no fall" if training is None else f"{training[0]} at {training[1]:.2f} s"})
    return out


HEADER = (f"{'iteration':>9}  {'env steps':>11}  {'train s':>8}  {'fall':>6}  {'air s':>6}  {'steps Hz':>8}  "
          f"{'dsupport':>8}  {'track err':>9}  verdict")


def print_header() -> None:
    print(HEADER)
    print("-" * len(HEADER))


def acceptance_row(report: EvalReport, iteration: int, env_steps: int, train_s: float) -> dict:
    """One checkpoint's row: falls, the gait means of the envs commanded to walk, the verdict."""
    s, verdict = report.summary(), report.verdict()
    means = walking_means(report.gait, report.config.gait)
    walkers = bool(means.command_speed[0] > 0)  # 0: no env was commanded to walk
    mean = lambda v: float(v[0]) if walkers else float("nan")  # noqa: E731
    return {"iteration": iteration, "env_steps": env_steps, "train_s": train_s, "fall_rate": s["fall_rate"],
            "air_time_s": mean(means.mean_air_time_s), "step_frequency_hz": mean(means.step_frequency_hz),
            "double_support": mean(means.double_support_ratio),
            "tracking_error": s["mean_velocity_tracking_error"], "verdict": verdict, "falls": falls(report)}


def print_row(row: dict) -> dict:
    """Print ``row`` as a table line, and the first five envs that fell; return it."""
    verdict = row["verdict"]
    failed = [k for k, ok in verdict.items() if k != "accepted" and not ok]
    print(f"{row['iteration']:>9}  {row['env_steps']:>11}  {row['train_s']:>8.0f}  {row['fall_rate']:>6.1%}  "
          f"{row['air_time_s']:>6.3f}  {row['step_frequency_hz']:>8.2f}  {row['double_support']:>8.2f}  "
          f"{row['tracking_error']:>9.3f}  " + ("ACCEPTED" if verdict["accepted"] else "rejected: " + ", ".join(failed)),
          flush=True)
    for fall in row["falls"][:5]:
        print(f"{'':>11}fell: env {fall['env']}, command {fall['command']}, {fall['cause']} at {fall['time_s']:.2f} s"
              f" (training rule: {fall['training_rule']})", flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", help="a run's log dir (model_<it>.pt, metrics.jsonl), or one checkpoint file")
    parser.add_argument("--every", type=int, default=200, help="evaluate checkpoints whose iteration is a multiple")
    parser.add_argument("--iterations", type=int, nargs="*", help="evaluate exactly these checkpoints")
    parser.add_argument("--gait-clock", action="store_true",
                        help="the run trained the gait-clock variant (checkpoints that record their task say so)")
    parser.add_argument("--backend", default="mujoco")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--num-envs", type=int, default=1024)
    parser.add_argument("--horizon-s", type=float, default=15.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--command", default="0.5,0.0,0.0", help="v_x,v_y,w_z for every env, or 'env' (mixed)")
    add_solver_args(parser)
    parser.add_argument("--json", default=None, help="write the rows here")
    parser.add_argument("overrides", nargs="*", metavar="env.KEY=VALUE", help="changes to the recorded task")
    args = parser.parse_intermixed_args()  # overrides may come after the options
    solver = solver_overrides(args)
    try:  # every mistake in one line, before anything is built
        keys = [parse_override(o)[0] for o in args.overrides]
    except OverrideError as err:
        parser.error(str(err))
    if any(not k.startswith("env.") for k in keys):
        parser.error(f"overrides change the task: env.KEY=VALUE (got {', '.join(k for k in keys if not k.startswith('env.'))})")
    torch.set_grad_enabled(False)

    run_dir = Path(args.run_dir)
    log = run_dir if run_dir.is_dir() else run_dir.parent
    # without the run's log (a checkpoint on its own) env steps come from the checkpoint, seconds are unknown
    metrics = read_metrics(log) if (log / "metrics.jsonl").exists() else []
    progress = {int(r["iteration"]): (int(r["total_steps"]), r["train_s"]) for r in metrics}
    device = args.device if args.backend == "warp" else "cpu"
    chosen = checkpoints(run_dir, args.every, args.iterations)
    # the task the run recorded (its command ranges too: a checkpoint that recorded none gets those of
    # its time, so that mixed-command figures stay comparable); --gait-clock for files that do not say
    env_cfg = checkpoint_walk_config(str(chosen[0][1]), gait_clock=True if args.gait_clock else None,
                                     num_envs=args.num_envs, seed=args.seed, device=device, **solver)
    judged = judged_walk_config(env_cfg)  # the acceptance's height line alone calls falls, as in the gate
    rule = "" if judged is env_cfg else (
        f", episodes ended under {judged.train_collapse_height:g} m (trained under {env_cfg.train_collapse_height:g} m:"
        f" the {judged.eval_success_height:g} m line alone calls falls)")
    env_cfg = judged
    try:
        env_cfg = apply_overrides({"env": env_cfg}, args.overrides)["env"]
    except OverrideError as err:
        parser.error(str(err))
    env = G1WalkEnv(env_cfg, backend=args.backend)
    commands = None if args.command == "env" else tuple(float(v) for v in args.command.split(","))
    evaluator = Evaluator(G1WalkProbe(env), EvalConfig(horizon_s=args.horizon_s, seed=args.seed, commands=commands))
    obs = env.reset(seed=args.seed)

    budget = (f", solver {env_cfg.solver_iterations or 'model'} iterations / {env_cfg.ls_iterations or 'model'} "
              "line-search steps") if solver else ""
    changed = rule + (f", {' '.join(args.overrides)}" if args.overrides else "")
    print(f"{run_dir}: {args.backend} ({device}), {args.num_envs} envs, {args.horizon_s:g} s, seed {args.seed}, "
          f"command {args.command}{budget}{changed}")
    print_header()
    rows = []
    for it, path in chosen:
        report = evaluator.evaluate(ActorCriticPolicy.from_checkpoint(path, obs, env.num_actions))
        if it not in progress:
            progress[it] = (int(checkpoint.read(path)["total_steps"]), float("nan"))
        rows.append(print_row(acceptance_row(report, it, *progress[it])))
    if args.json:
        Path(args.json).write_text(json.dumps({"run_dir": str(run_dir), "args": vars(args), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
