"""Isaac Lab's own ``Isaac-Velocity-Flat-G1`` through ``Runner`` beside rsl-rl-lib, over seeds: the
records ``benchmarks/isaaclab_g1.py flat`` writes (``<out>/flat.json``, one folder per seed), read
into one row per seed and trainer and the goal's three lines.

The goal (BENCHMARKS.md, "Isaac Lab's own G1 beside rsl_rl"): ``Runner`` takes no more wall clock
per iteration than rsl-rl-lib, ends at the same or a higher return, and walks wherever rsl-rl-lib
walks. Each line is decided over the seeds where both trainers ran the same number of iterations:
the seconds per iteration and the return as means over those seeds, the walking seed by seed.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

RUNNER, RSL_RL = "ppo_bootstrap", "rsl_rl"
NAMES = {RUNNER: "Runner", RSL_RL: "rsl-rl-lib"}
RETURN_WINDOW = 10  # the return a run ends at: the mean over its last this many iterations
FORWARD_COMMAND = (0.5, 0.0, 0.0)  # the command a final policy is judged to walk at (vx, vy, yaw rate)
FORWARD = f"forward {FORWARD_COMMAND[0]:g} m/s"


def median_after_first(rows: list[dict], key: str) -> float:
    """Median of ``key`` over ``rows`` but the first (it holds the compile and warm-up); nan if none."""
    values = [r[key] for r in rows[1:] if r.get(key) is not None and not math.isnan(r[key])]
    return statistics.median(values) if values else float("nan")


def last_mean(rows: list[dict], key: str, k: int = RETURN_WINDOW) -> float:
    """Mean of ``key`` over the last ``k`` rows that have it; nan if none."""
    values = [r[key] for r in rows[-k:] if r.get(key) is not None and not math.isnan(r[key])]
    return sum(values) / len(values) if values else float("nan")


def record_seed(record: dict[str, Any]) -> int:
    """The seed a record was trained at (older records keep it only among their arguments)."""
    return int(record["seed"] if "seed" in record else record.get("args", {}).get("seed", 0))


def judged_rows(record: dict[str, Any], trainer: str) -> list[dict]:
    """The evaluator's rows of ``trainer``'s final policy (older records kept Runner's at the top)."""
    rows = record["trainers"].get(trainer, {}).get("judged")
    if rows is None and trainer == RUNNER:
        rows = record.get("judged")
    return rows or []


@dataclass(frozen=True)
class TrainerSeed:
    """One trainer at one seed: iterations run, median seconds per iteration, the return it ended at,
    whether its final policy walks (the gait verdict at forward 0.5 m/s accepted) and passes the
    walking gate (None: not judged)."""

    seed: int
    trainer: str
    iterations: int
    s_per_it: float
    end_return: float
    walks: bool | None
    gate: bool | None


def trainer_seed(record: dict[str, Any], trainer: str) -> TrainerSeed | None:
    """``trainer``'s row of one seed's record; None when that record has no rows of it."""
    tr = record["trainers"].get(trainer)
    if not tr or not tr.get("rows"):
        return None
    judged = judged_rows(record, trainer)
    forward = next((r for r in judged if r.get("command") == list(FORWARD_COMMAND)), None)
    gate = next((r["gate"]["passed"] for r in judged if "gate" in r), None)
    walks = None if forward is None else bool(forward["verdict"]["accepted"])
    return TrainerSeed(record_seed(record), trainer, int(tr["rows"][-1]["it"]),
                       median_after_first(tr["rows"], "wall_s"), last_mean(tr["rows"], "return"), walks, gate)


def seed_rows(records: list[dict[str, Any]]) -> list[TrainerSeed]:
    """Every trainer's row of every record, by seed, Runner first."""
    rows = [trainer_seed(rec, name) for rec in sorted(records, key=record_seed) for name in (RUNNER, RSL_RL)]
    return [r for r in rows if r is not None]


def goal_lines(rows: list[TrainerSeed]) -> list[str]:
    """The goal's three lines over the seeds where both trainers ran the same iterations, each ending in
    ``met`` or ``not met`` (the walking line: ``neither walks`` when neither does, ``no verdict`` when
    a final policy was not judged); one line saying so when no seed has both."""
    by_seed: dict[int, dict[str, TrainerSeed]] = {}
    for row in rows:
        by_seed.setdefault(row.seed, {})[row.trainer] = row
    pairs = {s: (t[RUNNER], t[RSL_RL]) for s, t in sorted(by_seed.items())
             if RUNNER in t and RSL_RL in t and t[RUNNER].iterations == t[RSL_RL].iterations}
    if not pairs:
        return ["no seed has both trainers at the same iterations: no verdict"]
    seeds = ("seed " if len(pairs) == 1 else "seeds ") + ", ".join(str(s) for s in pairs)
    ours_rows, their_rows = [p[0] for p in pairs.values()], [p[1] for p in pairs.values()]
    ours, theirs = statistics.mean(r.s_per_it for r in ours_rows), statistics.mean(r.s_per_it for r in their_rows)
    lines = [f"wall clock (mean s/it over {seeds}): Runner {ours:.3f} against rsl-rl-lib {theirs:.3f}: "
             + ("met" if ours <= theirs else "not met")]
    ours, theirs = statistics.mean(r.end_return for r in ours_rows), statistics.mean(r.end_return for r in their_rows)
    lines.append(f"return over the last {RETURN_WINDOW} iterations (mean over {seeds}): Runner {ours:.2f} "
                 f"against rsl-rl-lib {theirs:.2f}: " + ("met" if ours >= theirs else "not met"))
    rsl_walks = [s for s, (_, rsl) in pairs.items() if rsl.walks]
    runner_walks = [s for s, (run, _) in pairs.items() if run.walks]
    unjudged = [s for s, (run, rsl) in pairs.items() if run.walks is None or rsl.walks is None]
    named = lambda xs: ", ".join(map(str, xs)) or "none"  # noqa: E731
    if unjudged:
        lines.append(f"walking: final policies not judged at seeds {named(unjudged)}: no verdict")
    else:
        missed = [s for s in rsl_walks if s not in runner_walks]
        verdict = "neither walks" if not rsl_walks and not runner_walks else ("met" if not missed else "not met")
        lines.append(f"walks wherever rsl-rl-lib walks ({FORWARD} accepted): rsl-rl-lib at seeds {named(rsl_walks)}, "
                     f"Runner at {named(runner_walks)}: {verdict}")
    return lines


def format_seeds(records: list[dict[str, Any]]) -> str:
    """The seeds' table and the goal's lines, as ``benchmarks/isaaclab_g1.py table`` prints them."""
    yes_no = lambda v: "-" if v is None else ("yes" if v else "no")  # noqa: E731
    rows = seed_rows(records)
    out = [f"per seed: median s/it, the return over the last {RETURN_WINDOW} iterations, whether the final policy "
           f"walks ({FORWARD}) and passes the walking gate",
           "| seed | trainer | iterations | s/it | return | walks | walking gate |", "|---|---|---|---|---|---|---|"]
    out += [f"| {r.seed} | {NAMES[r.trainer]} | {r.iterations} | {r.s_per_it:.3f} | {r.end_return:.2f} | "
            f"{yes_no(r.walks)} | {'-' if r.gate is None else ('PASS' if r.gate else 'FAIL')} |" for r in rows]
    return "\n".join(out + goal_lines(rows))
