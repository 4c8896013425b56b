"""The gate of a G1 walking checkpoint: the command battery and the smoothness limits, one table.

    python benchmarks/g1_gate.py docs/checkpoints/g1_clock_it1296.pt
    python benchmarks/g1_gate.py runs/g1/model_1500.pt --json gate.json

Reads the task (gait clock or not, G1 model variant) from the checkpoint, runs the gate's one seeded
rollout on CPU MuJoCo (sim-to-sim for a checkpoint trained on MuJoCo Warp), and prints each line of
the gate (measured value, threshold, PASS / FAIL) and the overall verdict. Definitions:
:mod:`isaac_adapter.evaluation.gate`. Exit status 0 when the gate passes, 1 when it fails.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import _common  # noqa: F401  (puts the repository root on sys.path)
import torch

from isaac_adapter.evaluation import ActorCriticPolicy
from isaac_adapter.evaluation.g1_probe import G1WalkProbe
from isaac_adapter.evaluation.gate import GateConfig, run_gate
from isaac_adapter.tasks.g1_walk import G1WalkEnv
from isaac_adapter.tasks.registry import checkpoint_walk_config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint", help="a Runner checkpoint (model_<it>.pt) of a G1-Walk task")
    parser.add_argument("--starts", type=int, default=GateConfig.starts, help="noisy starts per command")
    parser.add_argument("--horizon-s", type=float, default=GateConfig.horizon_s)
    parser.add_argument("--seed", type=int, default=GateConfig.seed)
    parser.add_argument("--physics-threads", type=int, default=0, help="0: every core")
    parser.add_argument("--progress", action="store_true", help="show the rollout's progress")
    parser.add_argument("--json", default=None, help="write the gate's lines and verdict here")
    args = parser.parse_args(argv)
    torch.set_grad_enabled(False)

    cfg = GateConfig(starts=args.starts, horizon_s=args.horizon_s, seed=args.seed)
    env = G1WalkEnv(checkpoint_walk_config(args.checkpoint, num_envs=cfg.num_envs, seed=args.seed,
                                           physics_threads=args.physics_threads))
    policy = ActorCriticPolicy.from_checkpoint(args.checkpoint, env.reset(), env.num_actions)
    start = time.perf_counter()
    result = run_gate(G1WalkProbe(env), policy, cfg, progress=args.progress)
    seconds = time.perf_counter() - start
    print(f"{args.checkpoint}: CPU MuJoCo, {cfg.num_envs} envs")
    print(result.format())
    print(f"rollout and judgment: {seconds:.1f} s")
    if args.json:
        record = {"checkpoint": args.checkpoint, "seconds": seconds, **result.as_dict()}
        Path(args.json).write_text(json.dumps(record, indent=1))
    return 0 if result.passed else 1


if __name__ == "__main__":
    sys.exit(main())
