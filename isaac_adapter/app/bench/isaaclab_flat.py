"""Isaac Lab's own ``Isaac-Velocity-Flat-G1`` through ``Runner`` beside rsl-rl-lib, over seeds: the
records ``benchmarks/isaaclab_g1.py flat`` writes (``<out>/flat.json``, one folder per seed), read
into one row per seed and trainer and the goal's lines.

The goal (BENCHMARKS.md, "Isaac Lab's own G1 beside rsl_rl"): ``Runner`` takes no more wall clock
per iteration than rsl-rl-lib, ends at the same or a higher return, and walks wherever rsl-rl-lib
walks. Each line is decided over the seeds where both trainers ran the same number of iterations:
the seconds per iteration and the return as means over those seeds, the walking seed by seed. The
wall clock is compared only where both trainers ran every iteration on one GPU model (each row names
the GPU it ran on). A ``Runner`` run with another setting of :data:`RUNNER_SETTINGS` than the
value ``RunnerConfig.from_rsl_rl`` gives (rsl_rl's time-out bootstrap, say, or a new order of the
samples each epoch, which ``from_rsl_rl`` gave before it kept rsl-rl-lib's one order per update) is a
probe: it shows in the seeds' table under its settings, and its goal lines follow the goal's,
prefixed with them. A record trained with ``--env-overrides`` (a reward
change, the same for both trainers) is decided on its own, apart from the task as registered, and a
seed where both ran fewer than :data:`GOAL_ITERATIONS` is left out of the lines. Over fewer than
:data:`GOAL_SEEDS` seeds a line says the goal is not yet decided.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from ppo_bootstrap.ppo import PPOConfig
from ppo_bootstrap.rsl_rl import RSL_RL_SHUFFLE

from isaac_adapter.app.bench.common import (RETURN_WINDOW, RSL_RL, RUNNER, last_mean, learning_rate_cell,
                                            median_after_first)

NAMES = {RUNNER: "Runner", RSL_RL: "rsl-rl-lib"}
FORWARD_COMMAND = (0.5, 0.0, 0.0)  # the command a final policy is judged to walk at (vx, vy, yaw rate)
FORWARD = f"forward {FORWARD_COMMAND[0]:g} m/s"
# the Runner settings a record keeps, with the values the goal's Runner trains with (those of
# ``RunnerConfig.from_rsl_rl``); any other value makes the run a probe
EXACT = PPOConfig.timeout_bootstrap  # Runner's time-out bootstrap by default (the name earlier code imports)
RUNNER_SETTINGS = {"timeout_bootstrap": EXACT, "shuffle": RSL_RL_SHUFFLE}
SETTING_LABELS = {"timeout_bootstrap": "{} bootstrap", "shuffle": "shuffled {}"}
# the env's per-term episode logs a row keeps (Isaac Lab's reward, termination and command managers),
# on every this many iterations' rows (on all of them a record would be several times larger)
TERM_PREFIXES = ("Episode_Reward/", "Episode_Termination/", "Metrics/")
# the goal compares the trainers after this many iterations each, or more; shorter runs (the start of
# the curve, say) show in the seeds' table and stay out of the goal's lines
GOAL_ITERATIONS = 1000
GOAL_SEEDS = 2  # the goal is decided over at least this many seeds; fewer say so in a line of their own
# where a final policy is judged: as Isaac Lab's play scripts run the task (no interval pushes, no
# observation noise; the default), or in the world it trained in (records judged before the choice)
PLAY_WORLD, TRAINING_WORLD = JUDGE_WORLDS = ("play", "training")
TERMS_EVERY = 10
FALL_BIN_S = 5.0  # a judged line counts its falls per this many seconds of the rollout


def env_terms(means: Mapping[str, float], prefix: str = "") -> dict[str, float]:
    """The per-term episode logs among one iteration's env log means (keys ``prefix`` +
    ``Episode_Reward/<term>``, ...), keyed without ``prefix``, to 4 significant digits."""
    terms = {k.removeprefix(prefix): v for k, v in means.items() if k.startswith(prefix)}
    return {k: float(f"{v:.4g}") for k, v in terms.items() if k.startswith(TERM_PREFIXES)}


def row_terms(it: int, means: Mapping[str, float], prefix: str = "") -> dict[str, dict[str, float]]:
    """``{"terms": env_terms(means, prefix)}`` for iteration ``it`` if its row keeps them, else ``{}``."""
    return {"terms": env_terms(means, prefix)} if it % TERMS_EVERY == 0 else {}


def learner_state(learning_rate: float, action_std: float) -> dict[str, float]:
    """A row's learning rate (the one the update left) and mean action noise std, to 4 significant
    digits: the two quantities through which a trainer's update schedule shows."""
    return {"lr": float(f"{learning_rate:.4g}"), "action_std": float(f"{action_std:.4g}")}


def block_learner_cells(rows: list[dict]) -> tuple[str, str]:
    """A block's learning rate (the geometric mean over its rows: the schedule steps it by factors)
    and action std (the mean of its last ``RETURN_WINDOW`` rows), as table cells; ``-`` for rows that
    kept neither (older records)."""
    kept = [r for r in rows if "action_std" in r]
    return learning_rate_cell(rows), f"{last_mean(kept, 'action_std'):.3f}" if kept else "-"


def rows_with_devices(rows: Iterable[dict], resumed_at: int, earlier_rows: Iterable[dict], earlier_device: str,
                      device: str) -> list[dict]:
    """``rows``, each naming the GPU it ran on: an iteration past ``resumed_at`` ran in this run
    (``device``); one up to it keeps what it or the earlier run's row named (``earlier_device``, the
    earlier record's, for rows that named none). An iteration up to ``resumed_at`` that ``rows`` lack is
    the earlier run's row: a run folder brought to another machine may keep its checkpoint and not its log."""
    earlier_rows = list(earlier_rows)
    earlier = {r["it"]: r.get("device", earlier_device) for r in earlier_rows}
    logged = {r["it"] for r in rows}
    kept = [r for r in earlier_rows if r["it"] <= resumed_at and r["it"] not in logged]
    marked = [{**r, "device": device if r["it"] > resumed_at else r.get("device") or earlier.get(r["it"], earlier_device)}
              for r in [*kept, *rows]]
    return sorted(marked, key=lambda r: r["it"])


SETTLED_NOTE = ("returns, lengths and per-term logs leave out the iterations that ended partial episodes, "
                "after a call's randomized episode clocks")


def settled_rows(rows: list[dict]) -> list[dict]:
    """``rows`` less those whose episodes ended by the time limit shorter than the limit: partial
    episodes, whose return is not the policy's. Every call of the flat phase, a resumed one too, starts
    each env's episode clock at random (rsl_rl's ``init_at_random_ep_len``), so for one episode limit
    after each start the time-outs come early. The limit is read from the rows: the longest mean length
    of a row whose episodes all ended by the time limit. No time-out is longer, so a row left out
    surely ended a partial episode; rows of records that kept no time-outs are all kept."""
    full = [r["length"] for r in rows if r.get("ended") and r.get("timeouts") == r["ended"]]
    limit = max(full, default=0.0)
    # summed lengths below the time-outs' at the limit: some time-out was partial (half a step for rounding)
    return [r for r in rows if not (r.get("timeouts") and r["length"] * r["ended"] < r["timeouts"] * limit - 0.5)]


def record_seed(record: dict[str, Any]) -> int:
    """The seed a record was trained at (older records keep it only among their arguments)."""
    return int(record["seed"] if "seed" in record else record.get("args", {}).get("seed", 0))


def judged_rows(record: dict[str, Any], trainer: str) -> list[dict]:
    """The evaluator's rows of ``trainer``'s final policy (older records kept Runner's at the top)."""
    rows = record["trainers"].get(trainer, {}).get("judged")
    if rows is None and trainer == RUNNER:
        rows = record.get("judged")
    return rows or []


def falls_per_bin(times_s: Iterable[float], horizon_s: float) -> list[int]:
    """How many of the falls at ``times_s`` came in each :data:`FALL_BIN_S` of a ``horizon_s`` rollout
    (the last bin closed at the horizon): when a policy falls, at the start or under a later push."""
    bins = [0] * max(1, math.ceil(horizon_s / FALL_BIN_S))
    for t in times_s:
        bins[min(int(t // FALL_BIN_S), len(bins) - 1)] += 1
    return bins


WORLD_LABELS = {PLAY_WORLD: "as played", TRAINING_WORLD: "in the training world"}


def row_world(row: Mapping[str, Any]) -> str:
    """Where an evaluator's row was judged (:data:`JUDGE_WORLDS`; a row that names none was judged in
    the training world)."""
    return row.get("world", TRAINING_WORLD)


def judged_world(row: Mapping[str, Any]) -> str:
    """Where an evaluator's row was judged, as the tables name it (:data:`WORLD_LABELS`)."""
    return WORLD_LABELS[row_world(row)]


@dataclass(frozen=True)
class TrainerSeed:
    """One trainer at one seed: iterations run, median seconds per iteration, the return it ended at
    (over its last ``RETURN_WINDOW`` rows of :func:`settled_rows`),
    whether its final policy walks (the gait verdict at forward 0.5 m/s accepted) and passes the
    walking gate (None: not judged), the GPU models its iterations ran on, Runner's settings that
    differ from :data:`RUNNER_SETTINGS` (``(name, value)`` pairs; none for rsl-rl-lib) and the env
    changes the record was trained with (``--env-overrides``) and where the verdicts were judged."""

    seed: int
    trainer: str
    iterations: int
    s_per_it: float
    end_return: float
    walks: bool | None
    gate: bool | None
    devices: tuple[str, ...] = ()
    settings: tuple[tuple[str, str], ...] = ()
    env_overrides: tuple[str, ...] = ()
    judged_in: str | None = None  # where ``walks`` and ``gate`` were judged (one of JUDGE_WORLDS)

    @property
    def timeout_bootstrap(self) -> str | None:
        """Runner's time-out bootstrap (None for rsl-rl-lib), as this row's older field gave it."""
        return dict(self.settings).get("timeout_bootstrap", EXACT) if self.trainer == RUNNER else None

    @property
    def probe(self) -> bool:
        """A Runner run with a setting other than its default."""
        return bool(self.settings)

    @property
    def name(self) -> str:
        return ", ".join([NAMES[self.trainer], *setting_labels(self.settings), *self.env_overrides])


def setting_labels(settings: Iterable[tuple[str, str]]) -> list[str]:
    """A probe's settings as the tables name them (``state_value bootstrap``, ``shuffled every_epoch``)."""
    return [SETTING_LABELS[key].format(value) for key, value in settings]


@dataclass(frozen=True)
class Verdict:
    """A final policy's verdicts in one record: the checkpoint's iteration, whether it walks
    (:data:`FORWARD` accepted) and passes the walking gate (None: not judged), and where it was judged
    (one of :data:`JUDGE_WORLDS`; None when not judged)."""

    iteration: int | None
    walks: bool | None
    gate: bool | None
    world: str | None


def verdict(record: dict[str, Any], trainer: str) -> Verdict:
    """``trainer``'s verdicts in ``record`` (:func:`judged_rows`)."""
    judged = judged_rows(record, trainer)
    forward = next((r for r in judged if r.get("command") == list(FORWARD_COMMAND)), None)
    gate = next((r["gate"]["passed"] for r in judged if "gate" in r), None)
    walks = None if forward is None else bool(forward["verdict"]["accepted"])
    return Verdict(None if forward is None else int(forward["iteration"]), walks, gate,
                   None if forward is None else row_world(forward))


def record_overrides(record: dict[str, Any]) -> tuple[str, ...]:
    """The env changes a record was made with (``--env-overrides``)."""
    return tuple(record.get("args", {}).get("env_overrides", []))


def trainer_seed(record: dict[str, Any], trainer: str) -> TrainerSeed | None:
    """``trainer``'s row of one seed's record; None when that record has no rows of it."""
    tr = record["trainers"].get(trainer)
    if not tr or not tr.get("rows"):
        return None
    judged = verdict(record, trainer)
    devices = tuple(dict.fromkeys(r.get("device", record["device"]) for r in tr["rows"]))
    return TrainerSeed(record_seed(record), trainer, int(tr["rows"][-1]["it"]), median_after_first(tr["rows"], "wall_s"),
                       last_mean(settled_rows(tr["rows"]), "return"), judged.walks, judged.gate, devices,
                       runner_settings(tr) if trainer == RUNNER else (), record_overrides(record), judged.world)


JudgedKey = tuple[int, str, tuple[tuple[str, str], ...], tuple[str, ...], int]


def judged_only(records: list[dict[str, Any]]) -> dict[JudgedKey, Verdict]:
    """The verdicts of records that judged a checkpoint trained elsewhere (a trainer with judged rows
    and no training rows: ``flat --device cpu`` on a folder holding the final checkpoint), keyed by
    seed, trainer, Runner's settings, env changes and the checkpoint's iteration, as
    :func:`verdict_key` keys a row; of two for one key, the first given."""
    found: dict[JudgedKey, Verdict] = {}
    for rec in records:
        for trainer, tr in rec["trainers"].items():
            judged = verdict(rec, trainer)
            if not tr.get("rows") and judged.iteration is not None:
                settings = runner_settings(tr) if trainer == RUNNER else ()
                found.setdefault((record_seed(rec), trainer, settings, record_overrides(rec), judged.iteration), judged)
    return found


def verdict_key(row: TrainerSeed) -> JudgedKey:
    """The key of :func:`judged_only` under which ``row``'s final checkpoint was judged apart."""
    return row.seed, row.trainer, row.settings, row.env_overrides, row.iterations


def with_verdict(row: TrainerSeed, judged: Verdict | None) -> TrainerSeed:
    """``row`` with the verdicts of a record that judged its final checkpoint apart (:func:`judged_only`)
    where they were judged as played, or where ``row`` has none: the goal's walking line is judged as
    Isaac Lab's play scripts run the task, a training record's own verdicts may be the training world's."""
    if judged is None or not (judged.world == PLAY_WORLD or row.walks is None):
        return row
    return dataclasses.replace(row, walks=judged.walks, gate=judged.gate, judged_in=judged.world)


def trained_setting(trainer: Mapping[str, Any], key: str) -> str:
    """The value of setting ``key`` (of :data:`RUNNER_SETTINGS`) a record's Runner trained with; one an
    older record does not name was ``PPOConfig``'s default (``from_rsl_rl`` set neither then)."""
    return trainer.get(key, getattr(PPOConfig, key))


def runner_settings(trainer: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """The settings of :data:`RUNNER_SETTINGS` a record's Runner trained with other than the goal's."""
    trained = {key: trained_setting(trainer, key) for key in RUNNER_SETTINGS}
    return tuple((key, value) for key, value in trained.items() if value != RUNNER_SETTINGS[key])


def seed_rows(records: list[dict[str, Any]]) -> list[TrainerSeed]:
    """Every trainer's row of every record, by seed, Runner first; a row's verdicts are those of a
    record that judged its final checkpoint apart, as played (:func:`with_verdict`)."""
    apart = judged_only(records)
    rows = [trainer_seed(rec, name) for rec in sorted(records, key=record_seed) for name in (RUNNER, RSL_RL)]
    return [with_verdict(r, apart.get(verdict_key(r))) for r in rows if r is not None]


def seed_list(seeds: Iterable[int]) -> str:
    """``seed 1`` or ``seeds 0, 1``."""
    seeds = list(seeds)
    return ("seed " if len(seeds) == 1 else "seeds ") + ", ".join(map(str, seeds))


def goal_lines(rows: list[TrainerSeed], min_iterations: int = GOAL_ITERATIONS) -> list[str]:
    """The goal's lines (:func:`env_goal_lines`) for the task as registered, then for each set of env
    changes the records were trained with, those prefixed ``with <changes>:``; after each env's, the
    same lines for each probe's settings (:attr:`TrainerSeed.probe`) against rsl-rl-lib, prefixed
    ``Runner <settings>:``. Only the first, without probe settings, decide the goal."""
    envs = sorted(dict.fromkeys(r.env_overrides for r in rows)) or [()]  # the registered task, () first
    lines = []
    for overrides in envs:
        here = [r for r in rows if r.env_overrides == overrides]
        theirs = [r for r in here if r.trainer == RSL_RL]
        probes = sorted({r.settings for r in here if r.trainer == RUNNER and r.probe})
        for settings in [(), *probes]:  # the goal's Runner first
            labels = ([f"with {' '.join(overrides)}"] if overrides else []) + (
                [f"Runner {', '.join(setting_labels(settings))}"] if settings else [])
            prefix = ", ".join(labels) + ": " if labels else ""
            ours = [r for r in here if r.trainer == RUNNER and r.settings == settings]
            lines += [prefix + line for line in env_goal_lines(ours + theirs, min_iterations)]
    return lines


def paired_line(differences: Mapping[int, float]) -> str:
    """Runner's return less rsl-rl-lib's, seed by seed (two or more), their mean, its standard error
    (the differences' sample standard deviation over the square root of their count) and the paired t
    (mean over standard error): whether the seeds tell the trainers apart."""
    mean = statistics.mean(differences.values())
    error = statistics.stdev(differences.values()) / math.sqrt(len(differences))
    t = f"{mean / error:+.2f}" if error > 0 else "undefined (the same difference at every seed)"
    each = ", ".join(f"{d:+.2f} (seed {s})" for s, d in differences.items())
    return f"return, Runner less rsl-rl-lib by seed: {each}; mean {mean:+.2f}, standard error {error:.2f}, paired t {t}"


def env_goal_lines(rows: list[TrainerSeed], min_iterations: int = GOAL_ITERATIONS) -> list[str]:
    """The goal's three lines over the seeds of ``rows`` (one env, one Runner setting; of a trainer's
    runs at one seed, its longest) where both trainers ran the same iterations, at least
    ``min_iterations``, each ending in ``met`` or ``not met`` (the walking line: ``neither walks``
    when neither does, ``no verdict`` when a final policy was not judged; the wall clock over the
    seeds where both ran on one GPU model), over two or more seeds the return's :func:`paired_line` after
    the return's; one line saying so when no seed has both; then a line
    saying the goal is not yet decided over fewer than :data:`GOAL_SEEDS` seeds, and a last line
    naming the seeds left out for fewer iterations."""
    by_seed: dict[int, dict[str, TrainerSeed]] = {}
    for row in sorted(rows, key=lambda r: r.iterations):  # of a trainer's runs at one seed, its longest
        by_seed.setdefault(row.seed, {})[row.trainer] = row
    alike = {s: (t[RUNNER], t[RSL_RL]) for s, t in sorted(by_seed.items())
             if RUNNER in t and RSL_RL in t and t[RUNNER].iterations == t[RSL_RL].iterations}
    pairs = {s: p for s, p in alike.items() if p[0].iterations >= min_iterations}
    short = [s for s in alike if s not in pairs]
    left = [f"left out, fewer than {min_iterations:,} iterations: {seed_list(short)}"] if short else []
    if not pairs:
        return ["no seed has both trainers at the same iterations: no verdict"] + left
    seeds = seed_list(pairs)
    ours_rows, their_rows = [p[0] for p in pairs.values()], [p[1] for p in pairs.values()]
    one_gpu = {s: p for s, p in pairs.items() if len({*p[0].devices, *p[1].devices}) == 1}
    mixed = f" (left out, not on one GPU model: {seed_list(s for s in pairs if s not in one_gpu)})"
    if one_gpu:
        ours = statistics.mean(p[0].s_per_it for p in one_gpu.values())
        theirs = statistics.mean(p[1].s_per_it for p in one_gpu.values())
        lines = [f"wall clock (mean s/it over {seed_list(one_gpu)}): Runner {ours:.3f} against rsl-rl-lib "
                 f"{theirs:.3f}: " + ("met" if ours <= theirs else "not met") + (mixed if len(one_gpu) < len(pairs) else "")]
    else:
        lines = [f"wall clock: no seed has both trainers on one GPU model{mixed}: no verdict"]
    ours, theirs = statistics.mean(r.end_return for r in ours_rows), statistics.mean(r.end_return for r in their_rows)
    lines.append(f"return over the last {RETURN_WINDOW} iterations (mean over {seeds}): Runner {ours:.2f} "
                 f"against rsl-rl-lib {theirs:.2f}: " + ("met" if ours >= theirs else "not met"))
    if len(pairs) > 1:
        lines.append(paired_line({s: run.end_return - rsl.end_return for s, (run, rsl) in pairs.items()}))
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
    if len(pairs) < GOAL_SEEDS:
        lines.append(f"{len(pairs)} of the {GOAL_SEEDS} seeds the goal asks ({seeds}): not yet decided")
    return lines + left


def format_seeds(records: list[dict[str, Any]], min_iterations: int = GOAL_ITERATIONS) -> str:
    """The seeds' table and the goal's lines, as ``benchmarks/isaaclab_g1.py table`` prints them."""
    yes_no = lambda v: "-" if v is None else ("yes" if v else "no")  # noqa: E731
    rows = seed_rows(records)
    out = [f"per seed: median s/it, the return over the last {RETURN_WINDOW} iterations, whether the final policy "
           f"walks ({FORWARD}) and passes the walking gate, the GPU, where the final policy was judged (a "
           "record that judged it apart, as played, gives the verdicts)",
           SETTLED_NOTE,
           "| seed | trainer | iterations | s/it | return | walks | walking gate | GPU | judged |",
           "|---|---|---|---|---|---|---|---|---|"]
    out += [f"| {r.seed} | {r.name} | {r.iterations} | {r.s_per_it:.3f} | {r.end_return:.2f} | {yes_no(r.walks)} | "
            f"{'-' if r.gate is None else ('PASS' if r.gate else 'FAIL')} | {' + '.join(r.devices)} | "
            f"{'-' if r.judged_in is None else WORLD_LABELS[r.judged_in]} |" for r in rows]
    return "\n".join(out + goal_lines(rows, min_iterations))


def term_lines(record: dict[str, Any]) -> list[str]:
    """Each trainer's per-term episode logs (:func:`env_terms`) at the end of its rows, the mean over
    the last ``RETURN_WINDOW`` rows that kept them (:data:`TERMS_EVERY`), one table row per term; none
    if no row kept any."""
    ends = {name: {} for name in record["trainers"]}
    for name, tr in record["trainers"].items():
        kept = [r["terms"] for r in settled_rows(tr["rows"]) if r.get("terms")][-RETURN_WINDOW:]
        for term in dict.fromkeys(k for terms in kept for k in terms):
            values = [terms[term] for terms in kept if term in terms]
            ends[name][term] = sum(values) / len(values)
    terms = list(dict.fromkeys(k for end in ends.values() for k in end))
    if not terms:
        return []
    names = list(ends)
    cell = lambda end, term: f"{end[term]:.4g}" if term in end else "-"  # noqa: E731
    return ([f"per-term episode logs (per step, as the trainers log them), mean of the last {RETURN_WINDOW} rows "
             f"that kept them (every {TERMS_EVERY}th iteration)",
             "| term | " + " | ".join(NAMES.get(n, n) for n in names) + " |", "|---|" + "---|" * len(names)]
            + [f"| {term} | " + " | ".join(cell(ends[n], term) for n in names) + " |" for term in terms])
