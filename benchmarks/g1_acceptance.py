"""G1 learning curve as the evaluator sees it: every checkpoint of a training run, judged alike.

    python benchmarks/g1_acceptance.py runs/g1 --every 200 --backend warp --device cuda --num-envs 1024
    python benchmarks/g1_acceptance.py runs/g1 --iterations 1500 --command env     # the mixed command set

For each ``model_<it>.pt`` of the run directory (every ``--every`` iterations, or the ones named) it
runs one seeded evaluation (fixed command 0.5 m/s by default, 15 s horizon, falls judged at
``eval_success_height``) and prints a table: iteration, env steps and training seconds to that
checkpoint (from the run's ``metrics.jsonl``: the sum of the Runner's per-iteration collection and
update times, so start-up and kernel compilation are not in it), fall rate, the gait means of the
envs commanded to walk and the policy verdict. ``--json`` keeps the rows.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import _common  # noqa: F401  (puts the repository root on sys.path)
import torch

from ppo_bootstrap.runner import read_metrics

from isaac_adapter.evaluation import ActorCriticPolicy, EvalConfig, Evaluator, G1WalkProbe, load_checkpoint_policy
from isaac_adapter.tasks.g1_walk import G1WalkConfig, G1WalkEnv
from isaac_adapter.tasks.g1_walk.config import gait_clock_config


def checkpoints(run_dir: Path, every: int, named: list[int] | None) -> list[tuple[int, Path]]:
    found = {int(m.group(1)): p for p in run_dir.glob("model_*.pt") if (m := re.fullmatch(r"model_(\d+)\.pt", p.name))}
    if named:
        missing = [it for it in named if it not in found]
        if missing:
            raise SystemExit(f"no checkpoint for iterations {missing} in {run_dir} (have {sorted(found)})")
        return [(it, found[it]) for it in named]
    return [(it, p) for it, p in sorted(found.items()) if it % every == 0 or it == max(found)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir")
    parser.add_argument("--every", type=int, default=200, help="evaluate checkpoints whose iteration is a multiple")
    parser.add_argument("--iterations", type=int, nargs="*", help="evaluate exactly these checkpoints")
    parser.add_argument("--gait-clock", action="store_true", help="the run trained the gait-clock task variant")
    parser.add_argument("--backend", default="mujoco")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--num-envs", type=int, default=1024)
    parser.add_argument("--horizon-s", type=float, default=15.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--command", default="0.5,0.0,0.0", help="v_x,v_y,w_z for every env, or 'env' (mixed)")
    parser.add_argument("--json", default=None, help="write the rows here")
    args = parser.parse_args()
    torch.set_grad_enabled(False)

    run_dir = Path(args.run_dir)
    progress = {int(r["iteration"]): (int(r["total_steps"]), r["train_s"]) for r in read_metrics(run_dir)}
    make = gait_clock_config if args.gait_clock else G1WalkConfig
    device = args.device if args.backend == "warp" else "cpu"
    env = G1WalkEnv(make(num_envs=args.num_envs, seed=args.seed, device=device), backend=args.backend)
    commands = None if args.command == "env" else tuple(float(v) for v in args.command.split(","))
    evaluator = Evaluator(G1WalkProbe(env), EvalConfig(horizon_s=args.horizon_s, seed=args.seed, commands=commands))
    obs = env.reset(seed=args.seed)

    header = (f"{'iteration':>9}  {'env steps':>11}  {'train s':>8}  {'fall':>6}  {'air s':>6}  {'steps Hz':>8}  "
              f"{'dsupport':>8}  {'track err':>9}  verdict")
    print(f"{run_dir}: {args.backend} ({device}), {args.num_envs} envs, {args.horizon_s:g} s, seed {args.seed}, "
          f"command {args.command}")
    print(header)
    print("-" * len(header))
    rows = []
    for it, path in checkpoints(run_dir, args.every, args.iterations):
        policy = ActorCriticPolicy(load_checkpoint_policy(path, obs, env.num_actions, device=str(env.device)),
                                   env.num_envs, device=env.device)
        report = evaluator.evaluate(policy)
        s, verdict = report.summary(), report.verdict()
        walking = report.gait.command_speed >= report.config.gait.walk_command_speed
        mean = lambda v: float(v[walking].mean()) if bool(walking.any()) else float("nan")  # noqa: E731
        steps, seconds = progress.get(it, (float("nan"), float("nan")))
        row = {"iteration": it, "env_steps": steps, "train_s": seconds, "fall_rate": s["fall_rate"],
               "air_time_s": mean(report.gait.mean_air_time_s), "step_frequency_hz": mean(report.gait.step_frequency_hz),
               "double_support": mean(report.gait.double_support_ratio),
               "tracking_error": s["mean_velocity_tracking_error"], "verdict": verdict}
        rows.append(row)
        failed = [k for k, ok in verdict.items() if k != "accepted" and not ok]
        print(f"{it:>9}  {steps:>11}  {seconds:>8.0f}  {row['fall_rate']:>6.1%}  {row['air_time_s']:>6.3f}  "
              f"{row['step_frequency_hz']:>8.2f}  {row['double_support']:>8.2f}  {row['tracking_error']:>9.3f}  "
              + ("ACCEPTED" if verdict["accepted"] else "rejected: " + ", ".join(failed)), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"run_dir": str(run_dir), "args": vars(args), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
