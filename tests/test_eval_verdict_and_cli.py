"""Policy-level verdict over hand-made gait metrics, ``g1_walk.py --eval`` argument forwarding, and
the Runner's per-iteration ``metrics.jsonl``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from isaac_adapter.evaluation.gait import GAIT_CHECKS, GaitMetrics, GaitThresholds, policy_verdict, walking_means
from ppo_bootstrap import PolicyConfig, Runner, RunnerConfig
from ppo_bootstrap.envs import TimeLimitEnv

# -- policy_verdict ---------------------------------------------------------------------------------


def metrics(
    command_speed: list[float],
    air: list[float],
    double_support: list[float],
    frequency: list[float],
    tracking: list[float],
) -> GaitMetrics:
    n = len(command_speed)
    t = lambda values: torch.tensor(values, dtype=torch.float32)  # noqa: E731
    return GaitMetrics(
        window_s=torch.full((n,), 15.0),
        double_support_ratio=t(double_support),
        mean_air_time_s=t(air),
        step_frequency_hz=t(frequency),
        displacement_m=torch.full((n,), 3.0),
        velocity_tracking_error=t(tracking),
        torque_rms=torch.full((n,), 20.0),
        command_speed=t(command_speed),
    )


# two walkers (0.5 and 0.3 m/s) and one env asked to stand (0 m/s), standing still on both feet
WALK_AND_STAND = dict(
    command_speed=[0.5, 0.3, 0.0],
    air=[0.30, 0.25, 0.0],  # walking mean 0.275; with the stander it would be 0.183 < 0.2
    double_support=[0.4, 0.3, 1.0],  # walking mean 0.35; with the stander 0.567 > 0.5
    frequency=[2.0, 1.8, 0.0],  # walking mean 1.9
    tracking=[0.10, 0.05, 0.02],  # mean over all 0.0567
)
ALIVE = torch.tensor([True, True, True])
KEYS = {"no_falls", *GAIT_CHECKS, "accepted"}


def test_walking_means_average_stepping_over_walkers_and_the_rest_over_everyone() -> None:
    row = walking_means(metrics(**WALK_AND_STAND), GaitThresholds())
    assert row.mean_air_time_s.tolist() == pytest.approx([0.275])
    assert row.double_support_ratio.tolist() == pytest.approx([0.35])
    assert row.step_frequency_hz.tolist() == pytest.approx([1.9])
    assert row.velocity_tracking_error.tolist() == pytest.approx([0.17 / 3])
    assert row.command_speed.tolist() == pytest.approx([0.1])  # someone walks: the row is judged as walking
    nobody = walking_means(metrics([0.0, 0.05], [0.0, 0.0], [1.0, 1.0], [0.0, 0.0], [0.01, 0.03]), GaitThresholds())
    assert nobody.command_speed.tolist() == [0.0]  # nobody walks: the stepping criteria are exempt
    assert nobody.velocity_tracking_error.tolist() == pytest.approx([0.02])


def test_walkers_and_a_stander_are_accepted() -> None:
    verdict = policy_verdict(ALIVE, metrics(**WALK_AND_STAND), GaitThresholds())
    assert set(verdict) == KEYS
    assert all(type(v) is bool for v in verdict.values())  # plain bools: the verdict goes to JSON
    assert verdict == {k: True for k in KEYS}
    json.dumps(verdict)


def test_a_fall_anywhere_rejects_the_policy() -> None:
    for fallen in range(3):
        survived = ALIVE.clone()
        survived[fallen] = False
        verdict = policy_verdict(survived, metrics(**WALK_AND_STAND), GaitThresholds())
        assert verdict["no_falls"] is False and verdict["accepted"] is False
        assert all(verdict[name] for name in GAIT_CHECKS)  # the gait itself is fine


def test_an_env_at_exactly_the_walk_speed_counts_as_walking() -> None:
    # the stander's command raised to walk_command_speed (0.1, inclusive): its air time 0 and
    # double support 1.0 now enter the means (0.183 < 0.2, 0.567 > 0.5); cadence 1.267 still passes
    thresholds = GaitThresholds()
    case = dict(WALK_AND_STAND, command_speed=[0.5, 0.3, thresholds.walk_command_speed])
    verdict = policy_verdict(ALIVE, metrics(**case), thresholds)
    assert verdict == {"no_falls": True, "air_time": False, "double_support": False,
                       "step_frequency": True, "tracking": True, "accepted": False}
    # just below it: standing again, excluded from the stepping means
    case["command_speed"] = [0.5, 0.3, 0.09]
    assert policy_verdict(ALIVE, metrics(**case), thresholds)["accepted"] is True


def test_stepping_criteria_use_the_mean_of_the_walking_envs() -> None:
    # one walker misses the air-time minimum alone (0.15), the mean of the walkers (0.225) passes
    case = dict(WALK_AND_STAND, air=[0.30, 0.15, 0.0])
    assert policy_verdict(ALIVE, metrics(**case), GaitThresholds())["air_time"] is True
    # both walkers short: mean 0.175 fails
    case = dict(WALK_AND_STAND, air=[0.20, 0.15, 0.0])
    verdict = policy_verdict(ALIVE, metrics(**case), GaitThresholds())
    assert verdict["air_time"] is False and verdict["accepted"] is False
    assert verdict["double_support"] and verdict["step_frequency"] and verdict["tracking"]
    # double support: walkers 0.6 and 0.5 (mean 0.55) fail the 0.5 limit
    case = dict(WALK_AND_STAND, double_support=[0.6, 0.5, 0.0])
    verdict = policy_verdict(ALIVE, metrics(**case), GaitThresholds())
    assert verdict["double_support"] is False and verdict["accepted"] is False
    # a stricter threshold rejects the default case (0.275 < 0.3)
    strict = GaitThresholds(min_mean_air_time_s=0.3)
    assert policy_verdict(ALIVE, metrics(**WALK_AND_STAND), strict)["air_time"] is False


@pytest.mark.parametrize(
    "walker_freqs, ok",
    [
        ([2.0, 1.8], True),
        ([1.0, 1.0], True),  # the band is inclusive
        ([3.0, 3.0], True),
        ([0.5, 0.9], False),  # mean 0.7 below 1 Hz
        ([3.5, 3.1], False),  # mean 3.3 above 3 Hz
        ([0.2, 3.8], True),  # neither walker inside the band, their mean 2.0 is
    ],
)
def test_step_frequency_band(walker_freqs: list[float], ok: bool) -> None:
    case = dict(WALK_AND_STAND, frequency=[*walker_freqs, 0.0])
    verdict = policy_verdict(ALIVE, metrics(**case), GaitThresholds())
    assert verdict["step_frequency"] is ok
    assert verdict["accepted"] is ok


def test_step_frequency_band_from_the_thresholds() -> None:
    narrow = GaitThresholds(step_frequency_hz=(1.95, 2.5))
    assert policy_verdict(ALIVE, metrics(**WALK_AND_STAND), narrow)["step_frequency"] is False  # 1.9
    wide = GaitThresholds(step_frequency_hz=(1.85, 2.5))
    assert policy_verdict(ALIVE, metrics(**WALK_AND_STAND), wide)["step_frequency"] is True


def test_tracking_is_the_mean_over_every_env_standers_included() -> None:
    # walkers track within 0.10, the stander drifts 0.30: mean 0.1667 > 0.15
    case = dict(WALK_AND_STAND, tracking=[0.10, 0.10, 0.30])
    verdict = policy_verdict(ALIVE, metrics(**case), GaitThresholds())
    assert verdict["tracking"] is False and verdict["accepted"] is False
    assert verdict["air_time"] and verdict["double_support"] and verdict["step_frequency"]
    # one walker over the limit (0.20), mean 0.1333 within it
    case = dict(WALK_AND_STAND, tracking=[0.20, 0.10, 0.10])
    assert policy_verdict(ALIVE, metrics(**case), GaitThresholds())["tracking"] is True
    looser = GaitThresholds(max_velocity_tracking_error=0.2)
    case = dict(WALK_AND_STAND, tracking=[0.10, 0.10, 0.30])
    assert policy_verdict(ALIVE, metrics(**case), looser)["accepted"] is True


def test_all_standing_passes_the_stepping_criteria() -> None:
    # every env commanded below 0.1 m/s, standing on both feet: no walker to judge the gait on
    case = dict(command_speed=[0.0, 0.05, 0.02], air=[0.0] * 3, double_support=[1.0] * 3,
                frequency=[0.0] * 3, tracking=[0.01, 0.02, 0.03])
    verdict = policy_verdict(ALIVE, metrics(**case), GaitThresholds())
    assert verdict == {k: True for k in KEYS}
    case["tracking"] = [0.2, 0.2, 0.2]
    verdict = policy_verdict(ALIVE, metrics(**case), GaitThresholds())
    assert verdict["tracking"] is False and verdict["accepted"] is False
    assert verdict["air_time"] and verdict["double_support"] and verdict["step_frequency"]


# -- examples/g1_walk.py --eval -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def g1_walk():
    from isaac_adapter.app import cli  # examples/g1_walk.py is its command line

    return cli


def test_eval_argv_moves_the_checkpoint_first_and_keeps_every_other_flag(g1_walk) -> None:
    argv = ["--num-envs", "8", "--eval", "m.pt", "--seed", "3"]
    assert g1_walk.eval_argv(argv) == ["m.pt", "--num-envs", "8", "--seed", "3"]
    assert argv == ["--num-envs", "8", "--eval", "m.pt", "--seed", "3"]  # not modified in place
    assert g1_walk.eval_argv(["--eval=m.pt", "--num-envs", "8"]) == ["m.pt", "--num-envs", "8"]
    assert g1_walk.eval_argv(["--num-envs", "8", "--eval=runs/x/model_5.pt"]) == ["runs/x/model_5.pt", "--num-envs", "8"]
    assert g1_walk.eval_argv(["--eval", "zero"]) == ["zero"]
    assert g1_walk.eval_argv(["--sweep", "0.6,0.5", "--eval", "m.pt", "--backend", "warp", "--device", "cuda"]) == [
        "m.pt", "--sweep", "0.6,0.5", "--backend", "warp", "--device", "cuda",
    ]


def test_eval_argv_without_eval_is_none(g1_walk) -> None:
    assert g1_walk.eval_argv([]) is None
    assert g1_walk.eval_argv(["--num-envs", "8", "--seed", "3"]) is None
    assert g1_walk.eval_argv(["--play", "m.pt"]) is None


def test_abbreviated_eval_is_refused_rather_than_training(g1_walk) -> None:
    # eval_argv knows only the full spelling; argparse must not read "--ev" as --eval and train
    assert g1_walk.eval_argv(["--ev", "m.pt"]) is None
    with pytest.raises(SystemExit):
        g1_walk.parse_args(["--ev", "m.pt"])


def test_main_forwards_eval_flags_untouched(g1_walk, monkeypatch) -> None:
    from isaac_adapter.app import eval as evaluation

    received: list[list[str]] = []
    monkeypatch.setattr(evaluation, "main", lambda argv: received.append(list(argv)))
    assert g1_walk.main(["--num-envs", "8", "--eval", "m.pt", "--seed", "3"]) is None
    assert received == [["m.pt", "--num-envs", "8", "--seed", "3"]]


# -- Runner metrics.jsonl ---------------------------------------------------------------------------

T, N, EPISODE = 8, 4, 5


def runner_cfg(log_dir: Path, obs_normalization: bool = True) -> RunnerConfig:
    return RunnerConfig(
        num_steps_per_env=T, console=False, log_dir=str(log_dir), save_interval=0, seed=3,
        policy=PolicyConfig(actor_hidden=(16,), critic_hidden=(16,), obs_normalization=obs_normalization),
    )


def read_rows(log_dir: Path) -> list[dict]:
    lines = (log_dir / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def ended_between(start_counts: list[int], first_step: int, last_step: int) -> int:
    """Episodes ending in env steps ``first_step..last_step`` (1-based) of envs whose clocks start at
    ``start_counts``: each env times out whenever its count reaches a multiple of ``EPISODE``."""
    return sum((s + last_step) // EPISODE - (s + first_step - 1) // EPISODE for s in start_counts)


def test_metrics_jsonl_one_row_per_iteration_without_the_warm_up_steps(tmp_path: Path) -> None:
    env = TimeLimitEnv(num_envs=N, episode_length=EPISODE, seed=4)
    runner = Runner(env, runner_cfg(tmp_path))
    start = env.step_count.tolist()  # staggered clocks after the Runner's reset
    runner.learn(3)
    rows = read_rows(tmp_path)
    assert [row["iteration"] for row in rows] == [1, 2, 3]
    # the normalizer warm-up is one more rollout of T * N env steps before iteration 1; no learning
    # happens in it, so total env steps count the training rollouts alone
    assert [row["total_steps"] for row in rows] == [T * N, 2 * T * N, 3 * T * N]
    assert runner.total_steps == 3 * T * N
    # episodes/ended per row: iteration i covers env steps i*T+1 .. (i+1)*T (the warm-up took 1..T)
    assert [row["episodes/ended"] for row in rows] == [
        ended_between(start, i * T + 1, (i + 1) * T) for i in (1, 2, 3)
    ]
    for row in rows:
        assert row["perf/collection_s"] >= 0 and row["perf/learning_s"] >= 0
        assert {"loss/value", "loss/surrogate", "policy/kl", "perf/steps_per_s", "time"} <= set(row)
    assert [r["time"] for r in rows] == sorted(r["time"] for r in rows)
    # the last row holds the last iteration's statistics
    assert {k: rows[-1][k] for k in runner.last_stats} == runner.last_stats


def test_metrics_jsonl_without_normalization_counts_only_training_rollouts(tmp_path: Path) -> None:
    env = TimeLimitEnv(num_envs=N, episode_length=EPISODE, seed=4)
    runner = Runner(env, runner_cfg(tmp_path, obs_normalization=False))
    start = env.step_count.tolist()
    runner.learn(2)
    rows = read_rows(tmp_path)
    assert [row["iteration"] for row in rows] == [1, 2]
    assert [row["total_steps"] for row in rows] == [T * N, 2 * T * N]
    assert [row["episodes/ended"] for row in rows] == [ended_between(start, 1, T), ended_between(start, T + 1, 2 * T)]


def test_metrics_jsonl_appends_after_resume(tmp_path: Path) -> None:
    runner = Runner(TimeLimitEnv(num_envs=N, episode_length=EPISODE, seed=4), runner_cfg(tmp_path))
    runner.learn(2)
    assert (tmp_path / "model_2.pt").exists()
    first = read_rows(tmp_path)
    assert [row["iteration"] for row in first] == [1, 2]

    resumed = Runner(TimeLimitEnv(num_envs=N, episode_length=EPISODE, seed=9), runner_cfg(tmp_path))
    resumed.load(tmp_path / "model_2.pt")
    resumed.learn(2)  # no second warm-up: the count continues from the checkpoint
    rows = read_rows(tmp_path)
    assert rows[:2] == first  # earlier rows untouched
    assert [row["iteration"] for row in rows] == [1, 2, 3, 4]
    assert [row["total_steps"] for row in rows] == [T * N, 2 * T * N, 3 * T * N, 4 * T * N]
    assert all("perf/collection_s" in row for row in rows)


def test_read_metrics_keeps_the_resumed_rows_and_sums_training_seconds(tmp_path: Path) -> None:
    from ppo_bootstrap.runner import read_metrics

    # a run logged iterations 1..3, was resumed from its checkpoint at 2 and logged 3..4 again
    logged = [(1, 10, 1.0), (2, 20, 2.0), (3, 30, 4.0), (3, 30, 0.5), (4, 40, 0.25)]
    with open(tmp_path / "metrics.jsonl", "w") as f:
        for iteration, steps, seconds in logged:
            f.write(json.dumps({"iteration": iteration, "total_steps": steps,
                                "perf/collection_s": seconds, "perf/learning_s": seconds / 2}) + "\n")
    rows = read_metrics(tmp_path)
    assert [r["iteration"] for r in rows] == [1, 2, 3, 4]
    # iteration 3's first row (4.0 s) was abandoned on resume: 1.5, 3.0, 0.75, 0.375 s add up
    assert [r["train_s"] for r in rows] == pytest.approx([1.5, 4.5, 5.25, 5.625])
    assert rows[2]["perf/collection_s"] == 0.5
