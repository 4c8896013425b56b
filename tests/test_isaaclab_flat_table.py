"""The seeds' table and the goal's verdict of Isaac Lab's flat G1 through Runner beside rsl-rl-lib
(``benchmarks/isaaclab_g1.py table DIR ...``), on records made here with values whose means and
medians are worked out by hand below."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from isaac_adapter.app.bench import isaaclab_flat
from isaac_adapter.app.bench.isaaclab_flat import (GOAL_ITERATIONS, RSL_RL, RUNNER, block_learner_cells, env_terms,
                                                   last_mean, learner_state, median_after_first, row_terms,
                                                   falls_per_bin, rows_with_devices, seed_rows, settled_rows,
                                                   term_lines)


def goal_lines(rows: list) -> list[str]:
    """The goal's lines over these tests' records of a few iterations (the goal asks 1,000)."""
    return isaaclab_flat.goal_lines(rows, min_iterations=1)


def format_seeds(records: list[dict]) -> str:
    return isaaclab_flat.format_seeds(records, min_iterations=1)

ROOT = Path(__file__).resolve().parents[1]


def rows(walls: list[float], returns: list[float]) -> list[dict]:
    return [{"it": i + 1, "wall_s": w, "collect_s": w, "learn_s": 0.0, "return": r, "length": 900.0, "ended": 10,
             "timeouts": 9} for i, (w, r) in enumerate(zip(walls, returns))]


def judged(walks: bool, gate: bool) -> list[dict]:
    """The evaluator's two rows of a final policy as the flat phase records them (the first with the gate)."""
    gait = {"iteration": 4, "falls": [], "fall_rate": 0.0, "air_time_s": 0.3, "step_frequency_hz": 2.0,
            "double_support": 0.1, "tracking_error": 0.1}
    line = {"name": "falls", "value": 0.0, "op": "<=", "threshold": 1, "passed": gate}
    return [{**gait, "command": [0.5, 0.0, 0.0], "verdict": {"accepted": walks}, "gate": {"passed": gate, "lines": [line]}},
            {**gait, "command": "env", "verdict": {"accepted": False}}]


def record(seed: int, runner: dict, rsl: dict) -> dict:
    """A record as the flat phase writes it: Runner's settings named, from_rsl_rl's unless ``runner`` says."""
    return {"task": "Isaac-Velocity-Flat-G1", "num_envs": 4096, "build_s": 20.0, "device": "test", "seed": seed,
            "trainers": {RUNNER: {"timeout_bootstrap": "exact", "shuffle": "once", **runner, "steps_per_env": 24,
                                  "network": "(8,)"},
                         RSL_RL: {**rsl, "steps_per_env": 24, "network": "(8,)"}}}


# seed 0: Runner's s/it median of (1.0, 0.8, 1.2) = 1.0, rsl-rl-lib's of (1.1, 1.3, 1.2) = 1.2;
# the first row (compile) left out. Returns: Runner's last 10 of 12 values 1..12 -> mean of 3..12 = 7.5.
SEED0 = record(0, {"rows": rows([9.0, 1.0, 0.8, 1.2], [1, 2, 3, 4]), "judged": judged(False, False)},
               {"rows": rows([9.0, 1.1, 1.3, 1.2], [2, 4, 6, 8]), "judged": judged(True, True)})
# seed 1: s/it 0.6 and 1.0; returns 10 and 6 (every row the same); neither walks
SEED1 = record(1, {"rows": rows([5.0, 0.6, 0.6, 0.6], [10] * 4), "judged": judged(False, False)},
               {"rows": rows([5.0, 1.0, 1.0, 1.0], [6] * 4), "judged": judged(False, False)})


def test_medians_leave_the_first_row_out_and_the_return_is_the_last_10_iterations_mean() -> None:
    assert median_after_first(rows([9.0, 1.0, 0.8, 1.2], [0] * 4), "wall_s") == 1.0
    assert last_mean(rows([1.0] * 12, list(range(1, 13))), "return") == 7.5
    assert last_mean(rows([1.0] * 3, [float("nan"), 2.0, 4.0]), "return") == 3.0  # nan rows skipped


def test_the_goal_over_two_seeds() -> None:
    lines = goal_lines(seed_rows([SEED1, SEED0]))
    # s/it: Runner (1.0 + 0.6) / 2 = 0.8, rsl-rl-lib (1.2 + 1.0) / 2 = 1.1
    assert lines[0] == "wall clock (mean s/it over seeds 0, 1): Runner 0.800 against rsl-rl-lib 1.100: met"
    # return: Runner (2.5 + 10) / 2 = 6.25, rsl-rl-lib (5 + 6) / 2 = 5.5
    assert lines[1] == ("return over the last 10 iterations (mean over seeds 0, 1): Runner 6.25 against "
                        "rsl-rl-lib 5.50: met")
    # Runner less rsl-rl-lib: 2.5 - 5 = -2.5 (seed 0), 10 - 6 = +4 (seed 1); mean +0.75; sample std
    # sqrt(3.25^2 + 3.25^2) = 4.596, over sqrt(2): standard error 3.25; t = 0.75 / 3.25 = 0.23
    assert lines[2] == ("return, Runner less rsl-rl-lib by seed: -2.50 (seed 0), +4.00 (seed 1); mean +0.75, "
                        "standard error 3.25, paired t +0.23")
    # rsl-rl-lib walks at seed 0, Runner nowhere
    assert lines[3].endswith("rsl-rl-lib at seeds 0, Runner at none: not met")
    # seed 0 alone: Runner's return (1 + 2 + 3 + 4) / 4 = 2.5 against (2 + 4 + 6 + 8) / 4 = 5.0; seed 1 alone: slower
    assert goal_lines(seed_rows([SEED0]))[1].endswith("Runner 2.50 against rsl-rl-lib 5.00: not met")
    slower = record(1, SEED1["trainers"][RSL_RL], SEED1["trainers"][RUNNER])  # the two trainers' rows swapped
    assert goal_lines(seed_rows([slower]))[0].endswith("Runner 1.000 against rsl-rl-lib 0.600: not met")
    # two seeds decide the goal; one seed's lines say it is not decided yet
    assert len(lines) == 4 and goal_lines(seed_rows([SEED0]))[3] == "1 of the 2 seeds the goal asks (seed 0): not yet decided"
    # the same difference at every seed: no spread, no t
    same = record(1, {"rows": rows([5.0, 0.6, 0.6, 0.6], [3.5] * 4), "judged": judged(False, False)},
                  SEED1["trainers"][RSL_RL])  # 3.5 - 6 = -2.5, as seed 0's
    assert goal_lines(seed_rows([SEED0, same]))[2].endswith(
        "mean -2.50, standard error 0.00, paired t undefined (the same difference at every seed)")


def judged_apart(seed: int, trainer: str, iteration: int, walks: bool, gate: bool, world: str | None) -> dict:
    """A record that judged a checkpoint trained elsewhere (``flat --device cpu`` on a folder holding it):
    the trainer with no training rows, its judged rows at ``iteration`` in ``world`` (None: unnamed)."""
    rows_ = [{**r, "iteration": iteration, **({"world": world} if world else {})} for r in judged(walks, gate)]
    rec = record(seed, {"rows": [], "judged": rows_}, {"rows": []})
    if trainer == RSL_RL:
        rec["trainers"] = {RSL_RL: rec["trainers"][RUNNER] | {"rows": [], "judged": rows_}}
    return rec


def test_a_record_that_judged_the_final_checkpoint_as_played_gives_the_verdicts() -> None:
    # SEED1's own records judged neither trainer's policy walking (in the training world: they name no world)
    played = judged_apart(1, RUNNER, 4, walks=True, gate=True, world="play")
    runner, rsl = seed_rows([SEED1, played])
    assert (runner.walks, runner.gate, runner.judged_in) == (True, True, "play")
    assert (rsl.walks, rsl.gate, rsl.judged_in) == (False, False, "training")  # nothing judged it apart
    assert seed_rows([played]) == []  # a judging-only record has no row of its own
    assert goal_lines(seed_rows([SEED1, played]))[2].endswith("rsl-rl-lib at seeds none, Runner at 1: met")
    table = format_seeds([SEED1, played])
    assert "| 1 | Runner | 4 | 0.600 | 10.00 | yes | PASS | test | as played |" in table
    assert "| 1 | rsl-rl-lib | 4 | 1.000 | 6.00 | no | FAIL | test | in the training world |" in table
    # another checkpoint's verdict (iteration 3), another seed's, another env's or a probe's does not apply
    probe = judged_apart(1, RUNNER, 4, True, True, "play")
    probe["trainers"][RUNNER]["timeout_bootstrap"] = "state_value"
    for other in (judged_apart(1, RUNNER, 3, True, True, "play"), judged_apart(0, RUNNER, 4, True, True, "play"),
                  {**played, "args": {"env_overrides": ["env.rewards.feet_air_time.weight=3.0"]}}, probe):
        assert seed_rows([SEED1, other])[0].walks is False
    # judged apart in the training world: fills a verdict the training record lacks, replaces none
    unjudged = record(1, {k: v for k, v in SEED1["trainers"][RUNNER].items() if k != "judged"},
                      SEED1["trainers"][RSL_RL])
    trained_world = judged_apart(1, RUNNER, 4, walks=True, gate=False, world=None)
    assert seed_rows([SEED1, trained_world])[0].walks is False
    assert (seed_rows([unjudged, trained_world])[0].walks, seed_rows([unjudged, trained_world])[0].judged_in) == (True, "training")
    # rsl-rl-lib's too, the first of two given for one checkpoint
    rsl_played = seed_rows([judged_apart(1, RSL_RL, 4, True, False, "play"), SEED1,
                            judged_apart(1, RSL_RL, 4, False, False, "play")])[1]
    assert (rsl_played.walks, rsl_played.gate, rsl_played.judged_in) == (True, False, "play")


def test_a_seed_whose_trainers_ran_different_iterations_is_left_out_and_neither_walking_is_said() -> None:
    short = record(2, {"rows": rows([1.0] * 3, [0] * 3), "judged": judged(True, True)},
                   {"rows": rows([1.0] * 4, [0] * 4), "judged": judged(False, False)})
    lines = goal_lines(seed_rows([SEED1, short]))
    assert "(mean s/it over seed 1)" in lines[0] and "(mean over seed 1)" in lines[1]
    assert lines[1].endswith("Runner 10.00 against rsl-rl-lib 6.00: met")
    assert lines[2].endswith("rsl-rl-lib at seeds none, Runner at none: neither walks")
    assert goal_lines(seed_rows([short])) == ["no seed has both trainers at the same iterations: no verdict"]


def test_an_older_record_with_runners_judged_rows_at_the_top_and_an_unjudged_trainer() -> None:
    old = {**SEED1, "judged": judged(True, False), "trainers": {
        RUNNER: {k: v for k, v in SEED1["trainers"][RUNNER].items() if k != "judged"},
        RSL_RL: {k: v for k, v in SEED1["trainers"][RSL_RL].items() if k != "judged"}}}
    del old["seed"]
    old["args"] = {"seed": 1}  # older records keep the seed among their arguments alone
    runner, rsl = seed_rows([old])
    assert (runner.walks, runner.gate, rsl.walks, rsl.gate) == (True, False, None, None)
    assert goal_lines([runner, rsl])[2] == "walking: final policies not judged at seeds 1: no verdict"
    table = format_seeds([old])
    assert "| 1 | Runner | 4 | 0.600 | 10.00 | yes | FAIL |" in table
    assert "| 1 | rsl-rl-lib | 4 | 1.000 | 6.00 | - | - |" in table


def test_the_table_command_prints_the_seeds_and_names_a_missing_folder(tmp_path) -> None:
    for rec in (SEED0, SEED1):
        folder = tmp_path / f"flat_s{rec['seed']}"
        folder.mkdir()
        (folder / "flat.json").write_text(json.dumps(rec))
    script = [sys.executable, str(ROOT / "benchmarks" / "isaaclab_g1.py"), "table"]
    done = subprocess.run(script + [str(tmp_path / "flat_s0"), str(tmp_path / "flat_s1")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "| 0 | rsl-rl-lib | 4 | 1.200 | 5.00 | yes | PASS |" in done.stdout
    # 4 iterations each, fewer than the goal's 1,000: in the table, out of the goal's lines
    assert done.stdout.strip().splitlines()[-2:] == ["no seed has both trainers at the same iterations: no verdict",
                                                     "left out, fewer than 1,000 iterations: seeds 0, 1"]
    missing = subprocess.run(script + [str(tmp_path / "nothere")], capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and missing.stderr.strip().splitlines()[-1].endswith(
        f"table: no such folder: {tmp_path / 'nothere'}")
    empty = subprocess.run(script + [str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert empty.returncode == 2 and f"table: no flat.json or direct.json in {tmp_path}" in empty.stderr


def test_each_row_names_its_gpu_and_a_seed_split_over_two_models_is_left_out_of_the_wall_clock() -> None:
    earlier = [{"it": 1}, {"it": 2, "device": "H100"}, {"it": 3}]  # an older run's rows, one naming its GPU
    fresh = [{"it": i} for i in range(1, 6)]  # rebuilt from the trainer's own log, resumed after iteration 2
    marked = rows_with_devices(fresh, 2, earlier, "H200", "B200")
    assert [r["device"] for r in marked] == ["H200", "H100", "B200", "B200", "B200"]
    assert rows_with_devices([{"it": 1, "device": "A"}], 0, [], "H200", "B") == [{"it": 1, "device": "B"}]
    # a folder that kept only its checkpoint at iteration 2: the record's rows up to it, then the new log's
    only_new = rows_with_devices([{"it": 3}, {"it": 4}], 2, earlier, "H200", "B200")
    assert [(r["it"], r["device"]) for r in only_new] == [(1, "H200"), (2, "H100"), (3, "B200"), (4, "B200")]

    split = json.loads(json.dumps(SEED1))
    for i, row in enumerate(split["trainers"][RSL_RL]["rows"]):
        row["device"] = "other" if i >= 2 else "test"  # the record's own device is "test"
    runner, rsl = seed_rows([split])
    assert (runner.devices, rsl.devices) == (("test",), ("test", "other"))
    lines = goal_lines(seed_rows([SEED0, split]))
    assert lines[0] == ("wall clock (mean s/it over seed 0): Runner 1.000 against rsl-rl-lib 1.200: met "
                        "(left out, not on one GPU model: seed 1)")
    assert "(mean over seeds 0, 1)" in lines[1]  # the return does not depend on the GPU
    assert goal_lines(seed_rows([split]))[0] == "wall clock: no seed has both trainers on one GPU model (left out, " \
                                                "not on one GPU model: seed 1): no verdict"
    assert "| 1 | rsl-rl-lib | 4 | 1.000 | 6.00 | no | FAIL | test + other |" in format_seeds([split])


def test_a_runner_run_with_another_bootstrap_is_a_probe_that_does_not_decide_the_goal() -> None:
    probe = json.loads(json.dumps(SEED0))
    probe["trainers"][RUNNER]["timeout_bootstrap"] = "state_value"
    probe["trainers"][RUNNER]["rows"] = rows([9.0, 0.1, 0.1, 0.1], [100] * 4)  # would win every line
    del probe["trainers"][RSL_RL]
    table = format_seeds([SEED0, probe])
    assert "| 0 | Runner, state_value bootstrap | 4 | 0.100 | 100.00 | no | FAIL | test |" in table
    lines = goal_lines(seed_rows([SEED0, probe]))
    assert lines[:4] == goal_lines(seed_rows([SEED0]))  # SEED0's Runner decides the goal: slower, lower
    assert lines[4].startswith("Runner state_value bootstrap: wall clock") and lines[4].endswith("0.100 against "
                                                                                              "rsl-rl-lib 1.200: met")
    assert len(lines) == 8
    assert goal_lines(seed_rows([probe])) == ["no seed has both trainers at the same iterations: no verdict",
                                              "Runner state_value bootstrap: no seed has both trainers at the same "
                                              "iterations: no verdict"]


def test_per_term_logs_keep_isaac_labs_episode_terms_and_end_at_the_mean_of_the_last_ten() -> None:
    means = {"env/Episode_Reward/feet_air_time": 0.123456, "env/Episode_Termination/time_out": 3.0,
             "env/Metrics/base_velocity/error_vel_xy": 0.5, "env/Curriculum/x": 1.0, "perf/steps_per_s": 9.0,
             "Episode_Reward/no_prefix": 1.0}
    assert env_terms(means, "env/") == {"Episode_Reward/feet_air_time": 0.1235, "Episode_Termination/time_out": 3.0,
                                        "Metrics/base_velocity/error_vel_xy": 0.5}
    assert env_terms({"Episode_Reward/a": 2.0, "other": 1.0}) == {"Episode_Reward/a": 2.0}
    # a row keeps them every 10th iteration
    assert row_terms(20, {"Episode_Reward/a": 2.0}) == {"terms": {"Episode_Reward/a": 2.0}}
    assert row_terms(21, {"Episode_Reward/a": 2.0}) == {}
    rec = json.loads(json.dumps(SEED0))
    # Runner: 12 rows with terms 1..12, the last 10 mean (3 + ... + 12) / 10 = 7.5; rsl-rl-lib: none but one
    rec["trainers"][RUNNER]["rows"] = [{"it": i, "terms": {"Episode_Reward/a": float(i)}} for i in range(1, 13)]
    rec["trainers"][RSL_RL]["rows"] = [{"it": 1, "terms": {"Episode_Reward/b": 4.0}}, {"it": 2}]
    assert term_lines(rec)[1:] == ["| term | Runner | rsl-rl-lib |", "|---|---|---|",
                                   "| Episode_Reward/a | 7.5 | - |", "| Episode_Reward/b | - | 4 |"]
    assert term_lines(SEED0) == []  # rows without terms: no table


def test_a_shuffle_probe_is_named_by_it_and_its_lines_follow_the_goals() -> None:
    probe = json.loads(json.dumps(SEED0))
    probe["trainers"][RUNNER]["shuffle"] = "every_epoch"
    del probe["trainers"][RSL_RL]
    assert "| 0 | Runner, shuffled every_epoch | 4 | 1.000 | 2.50 | no | FAIL | test |" in format_seeds([probe])
    (row,) = seed_rows([probe])
    assert (row.settings, row.timeout_bootstrap) == ((("shuffle", "every_epoch"),), isaaclab_flat.EXACT)
    assert isaaclab_flat.EXACT == "exact"
    # the goal's lines stay SEED0's; the probe's own follow, against SEED0's rsl-rl-lib (its rows are
    # SEED0's Runner's: s/it 1.0 against 1.2, return 2.5 against 5.0, rsl-rl-lib walks)
    lines = goal_lines(seed_rows([SEED0, probe]))
    assert lines[:4] == goal_lines(seed_rows([SEED0]))
    assert lines[4:] == [
        "Runner shuffled every_epoch: wall clock (mean s/it over seed 0): Runner 1.000 against rsl-rl-lib 1.200: met",
        "Runner shuffled every_epoch: return over the last 10 iterations (mean over seed 0): Runner 2.50 against "
        "rsl-rl-lib 5.00: not met",
        "Runner shuffled every_epoch: walks wherever rsl-rl-lib walks (forward 0.5 m/s accepted): rsl-rl-lib at "
        "seeds 0, Runner at none: not met",
        "Runner shuffled every_epoch: 1 of the 2 seeds the goal asks (seed 0): not yet decided"]
    # a probe alone: the goal's Runner has no seed, the probe's lines still come
    alone = goal_lines(seed_rows([{**probe, "trainers": {**probe["trainers"], RSL_RL: SEED0["trainers"][RSL_RL]}}]))
    assert alone[0] == "no seed has both trainers at the same iterations: no verdict" and alone[1:] == lines[4:]
    older = json.loads(json.dumps(SEED0))
    del older["trainers"][RUNNER]["shuffle"]  # written before records named it: PPOConfig's new order each epoch
    assert seed_rows([older])[0].settings == (("shuffle", "every_epoch"),)
    assert not any(row.probe for row in seed_rows([SEED0]))  # the settings from_rsl_rl gives, named


def test_of_a_trainers_runs_at_one_seed_the_longest_is_compared() -> None:
    # a second, shorter rsl-rl-lib run of seed 1 (2 iterations, return 99): SEED1's 4 are compared
    short = record(1, SEED1["trainers"][RUNNER], {"rows": rows([5.0, 1.0], [99, 99])})
    del short["trainers"][RUNNER]
    assert goal_lines(seed_rows([SEED1, short])) == goal_lines(seed_rows([SEED1]))
    assert goal_lines(seed_rows([short, SEED1])) == goal_lines(seed_rows([SEED1]))


def test_a_reward_change_is_decided_apart_from_the_task_as_registered() -> None:
    changed = json.loads(json.dumps(SEED1))
    changed["args"] = {"env_overrides": ["env.rewards.feet_air_time.weight=1.5"]}
    changed["seed"] = 0  # the same seed as SEED0, another env: both stay
    changed["trainers"][RUNNER]["judged"] = judged(True, True)
    changed["trainers"][RSL_RL]["judged"] = judged(True, False)
    lines = goal_lines(seed_rows([SEED0, changed]))
    assert lines[:4] == goal_lines(seed_rows([SEED0]))
    # SEED1's values at seed 0: s/it 0.6 against 1.0, returns 10 against 6, both walk
    assert lines[4:] == [
        "with env.rewards.feet_air_time.weight=1.5: wall clock (mean s/it over seed 0): Runner 0.600 against "
        "rsl-rl-lib 1.000: met",
        "with env.rewards.feet_air_time.weight=1.5: return over the last 10 iterations (mean over seed 0): Runner "
        "10.00 against rsl-rl-lib 6.00: met",
        "with env.rewards.feet_air_time.weight=1.5: walks wherever rsl-rl-lib walks (forward 0.5 m/s accepted): "
        "rsl-rl-lib at seeds 0, Runner at 0: met",
        "with env.rewards.feet_air_time.weight=1.5: 1 of the 2 seeds the goal asks (seed 0): not yet decided"]
    assert "| 0 | rsl-rl-lib, env.rewards.feet_air_time.weight=1.5 | 4 | 1.000 | 6.00 | yes | FAIL | test |" in \
        format_seeds([SEED0, changed])
    assert goal_lines(seed_rows([changed]))[0].startswith("with env.rewards.feet_air_time.weight=1.5: wall clock")


@pytest.mark.parametrize("flag, value, trained, named", [("--timeout-bootstrap", "state_value", "exact", True),
                                                         ("--shuffle", "every_epoch", "once", True),
                                                         ("--shuffle", "once", "every_epoch", False)])
def test_the_flat_phase_goes_on_only_with_the_settings_its_runner_started_with(tmp_path, flag, value, trained,
                                                                               named) -> None:
    earlier = json.loads(json.dumps({**SEED0, "args": {"env_overrides": []}}))
    if not named:  # a record from before the setting was named: trained with PPOConfig's default
        del earlier["trainers"][RUNNER][flag.removeprefix("--")]
    (tmp_path / "flat.json").write_text(json.dumps(earlier))
    script = [sys.executable, str(ROOT / "benchmarks" / "isaaclab_g1.py"), "flat", "--out", str(tmp_path)]
    done = subprocess.run(script + [flag, value], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith(
        f"{flag} {value}: {tmp_path / 'flat.json'} trained Runner with {trained}; give the same, or another --out")


def test_the_per_block_table_takes_a_block_and_a_last_iteration(tmp_path) -> None:
    (tmp_path / "flat.json").write_text(json.dumps(SEED0))
    script = [sys.executable, str(ROOT / "benchmarks" / "isaaclab_g1.py"), "table", str(tmp_path)]
    done = subprocess.run(script + ["--block", "2", "--until", "3"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    # Runner's rows 1-4: walls 9.0, 1.0 | 0.8 (row 4 past --until); returns 1, 2 | 3; each row 10 ended, 9 by
    # time; env-steps/s 24 steps x 4096 envs / the median s/it: 98,304 / 5.0 and / 0.8
    # these rows keep no learning rate or action std (as older records): "-"
    assert "| ppo_bootstrap | 1-2 | 5.000 | 19,661 | 1.50 | 900 | 20 | 18 | - | - | test |" in done.stdout
    assert "| ppo_bootstrap | 3-3 | 0.800 | 122,880 | 3.00 | 900 | 10 | 9 | - | - | test |" in done.stdout
    assert "| ppo_bootstrap | 3-4 |" not in done.stdout and "per 2 iterations" in done.stdout
    refused = subprocess.run(script + ["--block", "0"], capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines()[-1].endswith("--block 0: a row of the per-block table holds at least 1 iteration")


def test_iterations_that_ended_partial_episodes_after_a_resume_are_left_out_of_the_returns(tmp_path) -> None:
    def row(it: int, ret: float, length: float, ended: int, timeouts: int) -> dict:
        return {"it": it, "wall_s": 1.0, "collect_s": 1.0, "learn_s": 0.0, "return": ret, "length": length,
                "ended": ended, "timeouts": timeouts, "terms": {"Episode_Reward/a": ret}}

    # a run resumed at iteration 3: every episode clock restarted at random, so its first time-outs are short.
    # The episode limit, 1000 steps, is read from row 2: all 10 of its episodes ended by the time limit.
    # Row 1: 9 time-outs and a fall, lengths summing to 9.5 x 1000 >= 9 x 1000: whole episodes, kept.
    # Rows 3-4: 10 time-outs of 12 and 400 steps on average, below 10 x 1000: partial, left out.
    # Row 5: 8 time-outs of 10 episodes, 8,500 steps >= 8,000: kept.
    rows = [row(1, 20.0, 950.0, 10, 9), row(2, 24.0, 1000.0, 10, 10), row(3, 0.3, 12.0, 10, 10),
            row(4, 10.0, 400.0, 10, 10), row(5, 22.0, 850.0, 10, 8)]
    assert [r["it"] for r in settled_rows(rows)] == [1, 2, 5]
    # rows that kept no time-outs (older records), or ended none, are all kept; so is every row with no
    # row of time-outs alone to read the limit from
    assert settled_rows([{"it": 1, "return": 1.0, "length": 5.0, "ended": 3}, {"it": 2, "ended": 0, "timeouts": 0}]) \
        == [{"it": 1, "return": 1.0, "length": 5.0, "ended": 3}, {"it": 2, "ended": 0, "timeouts": 0}]
    assert len(settled_rows([row(1, 1.0, 10.0, 10, 9), row(2, 1.0, 20.0, 10, 9)])) == 2
    rec = record(0, {"rows": rows, "judged": judged(False, False)}, {"rows": rows[:2], "judged": judged(False, False)})
    runner, rsl = seed_rows([rec])
    assert runner.end_return == pytest.approx((20.0 + 24.0 + 22.0) / 3)  # not (20 + 24 + 0.3 + 10 + 22) / 5
    assert rsl.end_return == pytest.approx(22.0)
    assert term_lines(rec)[3] == "| Episode_Reward/a | 22 | 22 |"  # terms of rows 1, 2, 5: mean 22; rsl-rl-lib's 1, 2
    (tmp_path / "flat.json").write_text(json.dumps(rec))
    script = [sys.executable, str(ROOT / "benchmarks" / "isaaclab_g1.py"), "table", str(tmp_path), "--block", "2"]
    done = subprocess.run(script, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    # the main table's last 10 and each block's, over the kept rows: block 3-4 has none
    assert "| ppo_bootstrap | (8,) | 5 | 1.000 | 1.000 | 0.000 | 98,304 | 22.00 | 933 |" in done.stdout
    assert "| ppo_bootstrap | 3-4 | 1.000 | 98,304 | - | - | 20 | 20 | - | - | test |" in done.stdout
    assert "| ppo_bootstrap | 5-5 | 1.000 | 98,304 | 22.00 | 850 | 10 | 8 | - | - | test |" in done.stdout


def test_a_judged_line_counts_its_falls_per_five_seconds(tmp_path) -> None:
    # a 15 s rollout: [0, 5), [5, 10), [10, 15]; a fall at the horizon itself is in the last bin
    assert falls_per_bin([0.3, 4.99, 5.0, 11.2, 15.0], 15.0) == [2, 1, 2]
    assert falls_per_bin([], 10.0) == [0, 0]
    assert falls_per_bin([1.0], 2.0) == [1]  # a horizon shorter than a bin: one bin
    rec = json.loads(json.dumps(SEED0))
    rec["args"] = {"horizon_s": 15.0}
    fell = [{"env": e, "command": [0.5, 0.0, 0.0], "cause": "lateral", "time_s": t} for e, t in ((3, 1.5), (7, 12.25))]
    rec["trainers"][RUNNER]["judged"][0].update(falls=fell, fall_rate=2 / 256)
    (tmp_path / "flat.json").write_text(json.dumps(rec))
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "isaaclab_g1.py"), "table", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert ("ppo_bootstrap policy at iteration 4, command [0.5, 0.0, 0.0], in the training world: falls 0.78% "
            "(at 1.50-12.25 s; per 5 s: 1, 0, 1), air time") in done.stdout
    assert "rsl_rl policy at iteration 4, command [0.5, 0.0, 0.0], in the training world: falls 0.00%, air time" in done.stdout


def test_seeds_with_fewer_iterations_than_the_goal_asks_are_left_out_of_its_lines() -> None:
    assert GOAL_ITERATIONS == 1000  # the least number of iterations for both trainers
    # SEED0 and SEED1 ran 4 iterations each: with the goal's threshold at 4, both count; at 5, neither
    assert isaaclab_flat.goal_lines(seed_rows([SEED0, SEED1]), min_iterations=4) == goal_lines(seed_rows([SEED0, SEED1]))
    assert isaaclab_flat.goal_lines(seed_rows([SEED0, SEED1]), min_iterations=5) == [
        "no seed has both trainers at the same iterations: no verdict",
        "left out, fewer than 5 iterations: seeds 0, 1"]
    longer = json.loads(json.dumps(SEED1))
    for trainer in (RUNNER, RSL_RL):  # seed 1 with 6 iterations: it alone decides
        longer["trainers"][trainer]["rows"] += rows([1.0, 1.0], [0, 0])
        for i, row in enumerate(longer["trainers"][trainer]["rows"]):
            row["it"] = i + 1
    lines = isaaclab_flat.goal_lines(seed_rows([SEED0, longer]), min_iterations=5)
    assert lines[0].startswith("wall clock (mean s/it over seed 1)") and lines[-1] == "left out, fewer than 5 iterations: seed 0"
    assert "| 0 | Runner | 4 |" in isaaclab_flat.format_seeds([SEED0, longer], min_iterations=5)  # still in the table


def test_a_blocks_learning_rate_is_its_geometric_mean_and_its_action_std_the_last_rows_mean() -> None:
    assert learner_state(0.000123456, 0.876543) == {"lr": 0.0001235, "action_std": 0.8765}
    # learning rates 1e-3, 4e-3, 2e-3: geometric mean (8e-9)^(1/3) = 2e-3; stds 0.9, 0.6, 0.3: mean 0.6
    block = [{"it": i + 1, **learner_state(lr, std)} for i, (lr, std) in enumerate([(1e-3, 0.9), (4e-3, 0.6), (2e-3, 0.3)])]
    assert block_learner_cells(block) == ("2.00e-03", "0.600")
    assert block_learner_cells([{"it": 1}, *block]) == ("2.00e-03", "0.600")  # a row without them is left out
    assert block_learner_cells([{"it": 1}]) == ("-", "-")
