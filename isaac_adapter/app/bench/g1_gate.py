"""The gate of a G1 walking checkpoint: the command battery and the smoothness limits, one table.

    python benchmarks/g1_gate.py docs/checkpoints/g1_clock_it1296.pt
    python benchmarks/g1_gate.py runs/g1/model_1500.pt --json gate.json
    python benchmarks/g1_gate.py docs/checkpoints/g1_clock_it1296.pt --robust   # the robustness gate
    python benchmarks/g1_gate.py docs/checkpoints/g1_robust_s1_it1300.pt --robust --sim isaaclab  # on Isaac Lab
    python benchmarks/g1_gate.py docs/checkpoints/g1_robust_s1_it1300.pt --robust --only noise  # one part of it
    python benchmarks/g1_gate.py docs/checkpoints/g1_robust_ft_it2200.pt --robust --seed 0 1 2  # does it hold?
    python benchmarks/g1_gate.py --table docs/time_to_walk/robust/cpu_history/*.json  # records --json wrote

Reads the task (gait clock or not, G1 model variant, commands) from the checkpoint, runs the gate's
one seeded rollout on CPU MuJoCo (``--sim``: or MuJoCo Warp, or Isaac Lab's ``G1WalkDirectEnv``, on
``--device``) at the task's reference physics (5 ms x 4, the model's solver
budget, whatever the checkpoint trained with; sim-to-sim for a checkpoint trained on MuJoCo Warp;
its episodes ended no higher than the gate's 0.60 m line, whatever fall rule it trained with),
with one torch thread (the policy is small; more threads beside MuJoCo's only slow it), and prints each line of
the gate (measured value, threshold, PASS / FAIL) and the overall verdict. With ``--robust``, the robustness gate: the same battery, lines and thresholds under pushes (kicks of
up to 0.5 m/s every 2-4 s), foot friction 0.4-1.2, link masses +-10 %, policy observation noise and
a one-step action delay (``gate.ROBUST_GATE_RANDOMIZATION``). Definitions:
:mod:`isaac_adapter.evaluation.gate`. With several ``--seed``, the gate again at each (other noisy
starts, and under ``--robust`` other draws, kicks and noise), then one row per seed: a policy at the
edge of a limit passes at some seeds and fails at others. Exit status 0 when the gate passes (at
every seed given), 1 when it fails.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

from ppo_bootstrap.checkpoint import CheckpointError

from isaac_adapter.evaluation.gate import (FALL_FIELDS, ROBUST_GATE_PARTS, GateConfig, GateResult, gate_checkpoint,
                                          robust_gate_config)
from isaac_adapter.tasks.registry import UsageError

GATE_SIMS = {"mujoco": "CPU MuJoCo", "warp": "MuJoCo Warp", "isaaclab": "Isaac Lab"}


def env_builder(sim: str, device: str) -> Any:
    """``task config -> env`` for the gate on ``sim`` (None: the gate's own CPU MuJoCo env); the
    simulator's packages are checked first, with the line that says what to install."""
    from isaac_adapter.app.envs import check_sim

    check_sim(sim)
    if sim == "mujoco":
        return None
    if sim == "warp":
        from isaac_adapter.tasks.g1_walk import G1WalkEnv

        return lambda task: G1WalkEnv(dataclasses.replace(task, device=device), backend="warp")
    from isaac_adapter.isaaclab.g1_direct import make_g1_direct_env

    return lambda task: make_g1_direct_env(dataclasses.replace(task, device=device))


@torch.no_grad()  # in-process callers (tests, other scripts) get their grad mode back
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint", nargs="?", help="a Runner checkpoint (model_<it>.pt) of a G1-Walk task")
    parser.add_argument("--starts", type=int, default=GateConfig.starts, help="noisy starts per command")
    parser.add_argument("--horizon-s", type=float, default=GateConfig.horizon_s)
    parser.add_argument("--seed", type=int, nargs="+", default=[GateConfig.seed],
                        help="the rollout's seed; several: the gate at each, and one row per seed")
    parser.add_argument("--physics-threads", type=int, default=0, help="0: every core")
    parser.add_argument("--progress", action="store_true", help="show the rollout's progress")
    parser.add_argument("--json", default=None, help="write the gate's lines and verdict here")
    parser.add_argument("--robust", action="store_true",
                        help="the robustness gate: pushes, friction, masses, observation noise, action delay")
    parser.add_argument("--only", nargs="+", choices=tuple(ROBUST_GATE_PARTS), metavar="PART",
                        help="with --robust: keep only these parts of its randomization, to see which one a policy "
                             f"fails under ({', '.join(ROBUST_GATE_PARTS)})")
    parser.add_argument("--sim", choices=tuple(GATE_SIMS), default="mujoco", help="the simulator the gate runs on")
    parser.add_argument("--device", default="cpu", help="--sim warp or isaaclab: where the physics runs")
    parser.add_argument("--table", nargs="+", metavar="JSON", default=None,
                        help="print the records that --json wrote, one row per checkpoint (its seeds' mean of each "
                             "line, at how many seeds it passed), and measure nothing")
    args = parser.parse_args(argv)
    if args.table:
        if args.checkpoint:
            raise SystemExit("error: --table prints records already written; give it no checkpoint")
        print(records_table([_read_record(path) for path in args.table]))
        return 0
    if not args.checkpoint:
        raise SystemExit("error: give a checkpoint to judge, or --table JSON ... to print judged ones")
    if args.sim == "mujoco" and args.device != "cpu":
        raise SystemExit(f"error: --device {args.device}: CPU MuJoCo runs on the CPU; pick --sim warp or isaaclab")
    if not Path(args.checkpoint).is_file():
        raise SystemExit(f"error: {args.checkpoint}: no such checkpoint")
    torch.set_num_threads(1)

    if args.starts < 1 or args.horizon_s <= 0:
        raise SystemExit(f"error: --starts must be >= 1 and --horizon-s > 0, got {args.starts} and {args.horizon_s}")
    if args.only and not args.robust:
        raise SystemExit(f"error: --only {' '.join(args.only)}: parts of the robustness gate; add --robust")
    make_env = env_builder(args.sim, args.device)
    where = GATE_SIMS[args.sim] + ("" if args.sim == "mujoco" else f" ({args.device})")
    records = []
    for seed in args.seed:
        settings = dict(starts=args.starts, horizon_s=args.horizon_s, seed=seed)
        cfg = (robust_gate_config(only=tuple(args.only) if args.only else None, **settings) if args.robust
               else GateConfig(**settings))
        start = time.perf_counter()
        result = gate_checkpoint(args.checkpoint, cfg, physics_threads=args.physics_threads, progress=args.progress,
                                 make_env=make_env)
        seconds = time.perf_counter() - start
        print(f"{args.checkpoint}: {where}, {cfg.num_envs} envs, reference physics"
              + (", randomized" if cfg.randomization.enabled else ""))
        print(result.format())
        print(f"build, rollout and judgment: {seconds:.1f} s")
        records.append((seed, seconds, result))
    if len(records) > 1:
        print(seeds_table([(seed, result) for seed, _, result in records]))
    if args.json:
        runs = [{"checkpoint": args.checkpoint, "sim": args.sim, "device": args.device, "seconds": seconds,
                 **result.as_dict()} for _, seconds, result in records]
        record = runs[0] if len(runs) == 1 else {"checkpoint": args.checkpoint, "sim": args.sim, "device": args.device,
                                                 "passed": all(run["passed"] for run in runs), "seeds": runs}
        Path(args.json).write_text(json.dumps(record, indent=1))
    return 0 if all(result.passed for _, _, result in records) else 1


def seeds_table(results: list[tuple[int, GateResult]]) -> str:
    """One row per seed: each line's value (``*`` where it fails its limit) and the verdict; then
    at how many seeds the gate passed."""
    lines = results[0][1].lines
    heads = [_short(line.name) for line in lines]
    widths = [max(len(head), 9) for head in heads]

    def row(first: str, cells: list[str], last: str) -> str:
        return f"{first:<6}" + "  ".join(f"{cell:>{width}}" for cell, width in zip(cells, widths)) + f"  {last}"

    out = [row("seed", heads, "verdict"),
           row("limit", [f"{line.op} {line.text(line.threshold)} " for line in lines], "")]
    for seed, result in results:
        cells = [line.text(line.value) + (" " if line.passed else "*") for line in result.lines]
        out.append(row(str(seed), cells, "PASS" if result.passed else "FAIL"))
    passed = sum(result.passed for _, result in results)
    out.append(f"{results[0][1].config.name}: passed at {passed} of {len(results)} seeds")
    return "\n".join(out)


def _read_record(path: str) -> dict[str, Any]:
    """A record ``--json`` wrote, with its runs as a list ``seeds`` (one seed's record has its run at
    the top level)."""
    try:
        record = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise SystemExit(f"error: --table {path}: not a record that --json wrote ({err})") from None
    if not isinstance(record, dict) or not ("lines" in record or "seeds" in record):
        raise SystemExit(f"error: --table {path}: not a record that --json wrote (no gate lines in it)")
    record = record if "seeds" in record else {**record, "seeds": [record]}
    for run in record["seeds"]:
        falls = run.get("falls", [])
        if not isinstance(falls, list):
            raise SystemExit(f"error: --table {path}: falls is not a list: not as --json writes falls; "
                             "judge the checkpoint again with --json")
        for fall in falls:
            missing = [name for name in FALL_FIELDS if not isinstance(fall, dict) or name not in fall]
            if missing:
                raise SystemExit(f"error: --table {path}: a fall without {', '.join(missing)}: "
                                 "not as --json writes falls; judge the checkpoint again with --json")
    return record


def records_table(records: list[dict[str, Any]]) -> str:
    """One row per record: its checkpoint, each line's mean over the record's seeds (``*`` where the
    mean fails the line's limit), and at how many seeds the gate passed."""
    first = records[0]["seeds"][0]["lines"]
    heads = [_short(line["name"]) for line in first]
    widths = [max(len(head), 9) for head in heads]
    name_width = max(len("limit (a mean over seeds)"), *(len(r["checkpoint"]) for r in records))

    def row(name: str, cells: list[str], last: str) -> str:
        return f"{name:<{name_width}}  " + "  ".join(f"{c:>{w}}" for c, w in zip(cells, widths)) + f"  {last}"

    out = [row("checkpoint", heads, "passed at seeds"),
           row("limit (a mean over seeds)", [f"{line['op']} {line['threshold']:g} " for line in first], "")]
    for record in records:
        runs = record["seeds"]
        cells = []
        for k, line in enumerate(first):
            value = sum(run["lines"][k]["value"] for run in runs) / len(runs)
            ok = value <= line["threshold"] if line["op"] == "<=" else value >= line["threshold"]
            cells.append(f"{value:.{1 if line['name'].startswith('falls') else 3}f}" + (" " if ok else "*"))
        out.append(row(record["checkpoint"], cells, f"{sum(run['passed'] for run in runs)} of {len(runs)}"))
    out += [f"falls of {record['checkpoint']}: {causes}" for record in records if (causes := fall_causes(record))]
    return "\n".join(out)


def fall_causes(record: dict[str, Any]) -> str:
    """The falls of a record's seeds by the rule that counted them, with the range of root heights
    at the fall and of the time since the last kick: ``height 3 (root 0.594-0.600 m, 0.58-0.90 s
    after a kick)``, ``height 9 (root 0.582-0.600 m, 8 of them 0.50-0.94 s after a kick)`` where
    some came before any kick. Empty where the record has no falls, or was written before falls
    were kept."""
    by_cause: dict[str, list[dict[str, Any]]] = {}
    for run in record["seeds"]:
        for fall in run.get("falls", []):
            by_cause.setdefault(fall["cause"], []).append(fall)

    def span(values: list[float], fmt: str) -> str:
        lo, hi = min(values), max(values)
        return f"{lo:{fmt}}" if lo == hi else f"{lo:{fmt}}-{hi:{fmt}}"

    parts = []
    for cause, falls in by_cause.items():
        kicks = [f["since_kick_s"] for f in falls if f["since_kick_s"] is not None]
        some = "" if len(kicks) == len(falls) else f"{len(kicks)} of them "
        kick = f", {some}{span(kicks, '.2f')} s after a kick" if kicks else ""
        parts.append(f"{cause} {len(falls)} (root {span([f['root_height_m'] for f in falls], '.3f')} m{kick})")
    return ", ".join(parts)


def _short(name: str) -> str:
    """A gate line's name without its parenthesis (the column head)."""
    return name.split(" (")[0].replace(" RMS", "")


def cli(argv: list[str] | None = None) -> None:
    """:func:`main` as a command: its status the exit status, a damaged file or one of another task one line."""
    try:
        sys.exit(main(argv))
    except (CheckpointError, UsageError) as err:
        sys.exit(f"error: {err}")


if __name__ == "__main__":
    cli()
