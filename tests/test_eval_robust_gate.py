"""The robustness gate: the walking gate's battery and judgment under the task's randomization
(``gate.robust_gate_config``), its table and verdict, and the ``--robust`` mode of benchmarks/g1_gate.py."""

from __future__ import annotations

import os

import pytest

import math

import torch

from isaac_adapter.evaluation.g1_probe import G1WalkProbe
from isaac_adapter.evaluation.gate import (
    ROBUST_GATE_PARTS,
    ROBUST_GATE_RANDOMIZATION,
    ROBUST_GATE_RECOVERY_S,
    after_recovery,
    judge_gate,
    GateConfig,
    GateLine,
    GateResult,
    gate_task_config,
    robust_gate_config,
)
from isaac_adapter.evaluation.judge import ThresholdSet
from isaac_adapter.evaluation.synthetic import make_trace
from isaac_adapter.tasks.g1_walk import G1WalkConfig, G1WalkEnv
from isaac_adapter.tasks.g1_walk.randomization import RandomizationCfg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECKPOINT = os.path.join(ROOT, "docs", "checkpoints", "g1_clock_it1296.pt")


def _result(values: list[float], cfg: GateConfig) -> GateResult:
    """Hand-made lines: falls <= 1, tracking >= 0.9, then four smoothness limits of 0.2."""
    lines = [GateLine("falls (battery, all starts)", values[0], 1, "<="),
             GateLine("tracking perf (battery)", values[1], 0.9, ">=")]
    lines += [GateLine(f"smooth {i}", v, 0.2, "<=") for i, v in enumerate(values[2:])]
    return GateResult(lines, {"forward 0.8": {"falls": values[0], "tracking_perf": values[1]}}, 0, cfg)


@pytest.mark.parametrize("values, passed", [
    ([1, 0.90, 0.2, 0.2, 0.2, 0.2], True),  # every line exactly at its limit
    ([2, 0.95, 0.1, 0.1, 0.1, 0.1], False),  # one fall too many
    ([0, 0.899, 0.1, 0.1, 0.1, 0.1], False),  # tracking just under
    ([0, 0.95, 0.1, 0.1, 0.1, 0.2001], False),  # one smoothness line just over
])
def test_the_verdict_is_every_line_passing(values: list[float], passed: bool) -> None:
    result = _result(values, robust_gate_config(starts=1))
    assert result.passed is passed
    table = result.format()
    assert table.startswith("robust gate: 6 commands x 1 noisy starts")
    assert "randomization: friction 0.4..1.2; link_mass_scale 0.9..1.1; push_interval_s 2..4; push_velocity -0.5..0.5" in table
    assert table.splitlines()[-2].split() == ["robust", "gate", "PASS" if passed else "FAIL"]
    assert "tracking and smoothness judged outside the 1 s after each push; falls throughout" in table
    assert [row.split()[-1] for row in table.splitlines()[5:11]] == ["PASS" if line.passed else "FAIL" for line in result.lines]


def test_the_robust_gate_is_the_walking_gate_with_the_randomization_on() -> None:
    robust, walking = robust_gate_config(), GateConfig()
    assert robust.randomization == ROBUST_GATE_RANDOMIZATION and not walking.randomization.enabled
    assert (robust.battery, robust.thresholds, robust.starts) == (walking.battery, walking.thresholds, walking.starts)
    assert robust.recovery_s == ROBUST_GATE_RECOVERY_S == 1.0 and walking.recovery_s == 0
    rand = robust.randomization
    assert rand.push_interval_s == (2.0, 4.0) and rand.push_velocity == (-0.5, 0.5)
    assert rand.friction == (0.4, 1.2) and rand.link_mass_scale == (0.9, 1.1) and rand.action_delay_steps == (1, 1)
    assert rand.noisy and not robust.randomization.physics == ()
    # the task the checkpoint is judged on carries the gate's randomization, and the walking gate's is off
    assert gate_task_config(CHECKPOINT, robust).randomization == ROBUST_GATE_RANDOMIZATION
    assert gate_task_config(CHECKPOINT, walking).randomization == RandomizationCfg()
    assert gate_task_config(CHECKPOINT, robust_gate_config(randomization=RandomizationCfg())).randomization == RandomizationCfg()


def test_the_robust_mode_prints_the_table_for_a_shipped_checkpoint(capsys) -> None:
    from isaac_adapter.app.bench import g1_gate
    rc = g1_gate.main([CHECKPOINT, "--robust", "--starts", "1", "--horizon-s", "0.5", "--physics-threads", "1"])
    out = capsys.readouterr().out
    assert "7 envs, reference physics, randomized" in out and "robust gate: 6 commands x 1 noisy starts x 0.5 s" in out
    verdict = out.splitlines()[[i for i, row in enumerate(out.splitlines()) if row.startswith("robust gate  ")][0]]
    assert rc == (0 if verdict.split()[-1] == "PASS" else 1)
    for name in ("falls (battery, all starts)", "tracking perf (battery)", "roll/pitch rate RMS (rad/s)"):
        assert name in out


def test_several_seeds_run_the_gate_at_each_and_pass_only_if_every_seed_passes(tmp_path, capsys) -> None:
    """``--seed 0 1``: each seed's record is the one a run at that seed alone writes, the exit status
    is 1 unless every seed passed, and the closing row counts the seeds that passed."""
    import json

    from isaac_adapter.app.bench import g1_gate
    common = [CHECKPOINT, "--robust", "--starts", "1", "--horizon-s", "0.5", "--physics-threads", "1"]
    rc = g1_gate.main([*common, "--seed", "0", "1", "--json", str(tmp_path / "both.json")])
    both = json.loads((tmp_path / "both.json").read_text())
    alone = []
    for seed in (0, 1):
        g1_gate.main([*common, "--seed", str(seed), "--json", str(tmp_path / f"{seed}.json")])
        alone.append(json.loads((tmp_path / f"{seed}.json").read_text()))
    out = capsys.readouterr().out
    assert [run["config"]["seed"] for run in both["seeds"]] == [0, 1]
    for run, single in zip(both["seeds"], alone):
        assert run["lines"] == single["lines"] and run["per_command"] == single["per_command"]
    passed = [single["passed"] for single in alone]
    assert both["passed"] == all(passed) and rc == (0 if all(passed) else 1)
    assert f"robust gate: passed at {sum(passed)} of 2 seeds" in out


def test_the_seeds_table_marks_each_failing_value() -> None:
    from isaac_adapter.app.bench.g1_gate import seeds_table

    def result(seed: int, falls: float, perf: float) -> GateResult:
        lines = [GateLine("falls (battery, all starts)", falls, 1, "<="), GateLine("tracking perf (battery)", perf, 0.9, ">=")]
        return GateResult(lines, {}, 0, robust_gate_config(seed=seed))

    rows = seeds_table([(0, result(0, 1, 0.902)), (1, result(1, 2, 0.8998)), (2, result(2, 0, 0.95))]).splitlines()
    assert rows[0].split()[:4] == ["seed", "falls", "tracking", "perf"]
    assert rows[1].split() == ["limit", "<=", "1", ">=", "0.900"]
    assert rows[2].split() == ["0", "1", "0.902", "PASS"]
    assert rows[3].split() == ["1", "2*", "0.900*", "FAIL"]  # 0.8998 fails although it prints as 0.900
    assert rows[4].split() == ["2", "0", "0.950", "PASS"]
    assert rows[5] == "robust gate: passed at 2 of 3 seeds"


def test_the_robust_gate_in_parts_keeps_only_the_parts_asked_for() -> None:
    """Every randomized field of the gate belongs to exactly one part, so all parts together are the
    whole gate; one part keeps its fields and nothing else; the recovery window comes with the pushes."""
    whole = robust_gate_config(only=tuple(ROBUST_GATE_PARTS))
    assert whole.randomization == ROBUST_GATE_RANDOMIZATION and whole.recovery_s == ROBUST_GATE_RECOVERY_S
    noise = robust_gate_config(only=("noise",), starts=1)
    assert noise.randomization == RandomizationCfg(obs_noise=ROBUST_GATE_RANDOMIZATION.obs_noise)
    assert noise.recovery_s == 0 and noise.starts == 1 and noise.name == "robust gate"
    kicks = robust_gate_config(only=("pushes", "delay")).randomization
    assert (kicks.push_interval_s, kicks.push_velocity, kicks.action_delay_steps) == ((2.0, 4.0), (-0.5, 0.5), (1, 1))
    assert kicks.friction is None and kicks.link_mass_scale is None and not kicks.noisy
    for bad in (("gravity",), ()):
        with pytest.raises(ValueError, match=r"^only: the robustness gate's parts are friction, masses, pushes, noise, delay; "):
            robust_gate_config(only=bad)


def test_only_without_robust_is_refused_in_one_line() -> None:
    from isaac_adapter.app.bench import g1_gate

    with pytest.raises(SystemExit, match=r"^error: --only noise delay: parts of the robustness gate; add --robust$"):
        g1_gate.main([CHECKPOINT, "--only", "noise", "delay"])


def test_the_gate_on_another_simulator_is_refused_in_one_line_when_it_cannot_run(monkeypatch, capsys) -> None:
    """``--sim`` picks the simulator; one without its packages, or CPU MuJoCo asked onto a GPU, stops
    with one line naming the fix before anything is built."""
    import sys

    from isaac_adapter.app.bench import g1_gate
    from isaac_adapter.isaaclab import robot

    def missing() -> None:
        raise robot.IsaacLabSetupError("Isaac Lab is not installed: run scripts/isaaclab_tier.sh")

    monkeypatch.setattr(robot, "require_isaaclab", missing)
    monkeypatch.setitem(sys.modules, "isaac_adapter.isaaclab.g1_direct", None)  # importing it would fail
    with pytest.raises(SystemExit) as stopped:
        g1_gate.cli([CHECKPOINT, "--robust", "--sim", "isaaclab"])
    assert str(stopped.value.code) == "error: Isaac Lab is not installed: run scripts/isaaclab_tier.sh"
    with pytest.raises(SystemExit, match=r"^error: --device cuda:0: CPU MuJoCo runs on the CPU; pick --sim warp or isaaclab$"):
        g1_gate.main([CHECKPOINT, "--device", "cuda:0"])
    assert capsys.readouterr().out == ""


def test_after_recovery_leaves_out_the_kicked_step_and_the_ones_after_it() -> None:
    # env 0 kicked at steps 1 and 6, env 1 never; 3 steps of recovery: 1, 2, 3 and 6, 7, 8 are out
    pushed = torch.zeros(10, 2, dtype=torch.bool)
    pushed[[1, 6], 0] = True
    calm = after_recovery(pushed, 3)
    assert calm[:, 0].tolist() == [True, False, False, False, True, True, False, False, False, True]
    assert calm[:, 1].all()
    assert after_recovery(pushed, 0).all() and not after_recovery(pushed, 20)[1:, 0].any()


def test_the_robust_gate_judges_tracking_and_smoothness_outside_the_recoveries_and_falls_throughout() -> None:
    """A kick at step 10 of every env: 0.5 s of 2 rad/s tilt rate and 1 m/s of velocity error, then
    perfect walking; one battery env falls inside a recovery. With the 1 s recovery (50 steps at
    20 ms) the rate and tracking lines see only the perfect steps and the fall still counts."""
    rule = ThresholdSet(name="eval", eval_success_height=0.6, tilt_xy_max=0.8, lateral_vel_max=1.15,
                        tilt_grace_s=0.4, lateral_grace_s=0.7)
    walking, robust = GateConfig(starts=1), robust_gate_config(starts=1)
    n, t = walking.num_envs, 200
    height = torch.full((t, n), 0.75)
    height[15:, 0] = 0.3  # the first battery env collapses 5 steps after its kick
    trace = make_trace(t, n, base_height=height)
    trace.command = walking.commands().expand(t, n, 3).clone()
    trace.lin_vel_b = trace.command.clone()
    trace.lin_vel_b[10:35, :, 0] += 1.0
    trace.ang_vel_b = torch.zeros(t, n, 3)
    trace.ang_vel_b[10:35, :, 0] = 2.0
    trace.ang_vel_b[..., 2] = trace.command[..., 2]
    trace.action, trace.joint_vel = torch.zeros(t, n, 29), torch.zeros(t, n, 29)
    trace.pushed = torch.zeros(t, n, dtype=torch.bool)
    trace.pushed[10] = True
    legs = torch.tensor([0, 1, 2])
    plain = {line.name: line.value for line in judge_gate(trace, rule, legs, walking).lines}
    calm = {line.name: line.value for line in judge_gate(trace, rule, legs, robust).lines}
    assert plain["roll/pitch rate RMS (rad/s)"] == pytest.approx(math.sqrt(4.0 * 25 / 200))
    assert calm["roll/pitch rate RMS (rad/s)"] == 0.0 and calm["tracking perf (battery)"] == pytest.approx(1.0)
    assert plain["tracking perf (battery)"] < 0.95
    assert plain["falls (battery, all starts)"] == calm["falls (battery, all starts)"] == 1
    trace.pushed = None
    with pytest.raises(ValueError, match="records the pushes"):
        judge_gate(trace, rule, legs, robust)


def test_the_g1_probe_records_the_kicked_envs_of_each_step() -> None:
    cfg = G1WalkConfig(num_envs=4, seed=0, physics_threads=1,
                       randomization=RandomizationCfg(push_interval_s=(1.0, 2.0), push_velocity=(-0.5, 0.5)))
    env = G1WalkEnv(cfg)
    env.reset()
    probe = G1WalkProbe(env)
    env.push_steps_left = torch.tensor([1, 30, 1, 30])  # envs 0 and 2 are due at the next step
    sample = probe.after_step(env.step(torch.zeros(4, env.num_actions)))
    assert sample.pushed.tolist() == [True, False, True, False]
    assert not probe.after_step(env.step(torch.zeros(4, env.num_actions))).pushed.any()
    quiet = G1WalkEnv(G1WalkConfig(num_envs=2, seed=0, physics_threads=1))
    quiet.reset()
    assert G1WalkProbe(quiet).after_step(quiet.step(torch.zeros(2, quiet.num_actions))).pushed is None


def test_the_table_of_records_gives_each_lines_mean_over_the_seeds(tmp_path, capsys) -> None:
    """``--table``: one row per record that ``--json`` wrote, each line's mean over its seeds, ``*``
    where the mean fails the line's limit, and at how many seeds the gate passed; a one-seed record
    is a row of its own. Bad input is one line."""
    import json

    from isaac_adapter.app.bench import g1_gate

    def run(falls: float, perf: float) -> dict:
        return {"passed": falls <= 1 and perf >= 0.9,
                "lines": [{"name": "falls (battery, all starts)", "value": falls, "threshold": 1, "op": "<="},
                          {"name": "tracking perf (battery)", "value": perf, "threshold": 0.9, "op": ">="}]}

    records = {"a": {"checkpoint": "runs/a/model_10.pt", "seeds": [run(0, 0.95), run(2, 0.86)]},
               "b": {"checkpoint": "runs/b/model_10.pt", **run(1, 0.902)},
               "c": {"checkpoint": "runs/c/model_10.pt", "seeds": [run(2, 0.88), run(1, 0.90)]}}
    for name, record in records.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(record))
    assert g1_gate.main(["--table", *(str(tmp_path / f"{name}.json") for name in records)]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[1].split()[-4:] == ["<=", "1", ">=", "0.9"]
    assert rows[2].split() == ["runs/a/model_10.pt", "1.0", "0.905", "1", "of", "2"]
    assert rows[3].split() == ["runs/b/model_10.pt", "1.0", "0.902", "1", "of", "1"]
    assert rows[4].split() == ["runs/c/model_10.pt", "1.5*", "0.890*", "1", "of", "2"]

    (tmp_path / "other.json").write_text(json.dumps({"iteration": 3}))
    with pytest.raises(SystemExit, match=r"^error: --table .*other.json: not a record that --json wrote"):
        g1_gate.main(["--table", str(tmp_path / "other.json")])
    with pytest.raises(SystemExit, match="^error: --table prints records already written; give it no checkpoint"):
        g1_gate.main([CHECKPOINT, "--table", str(tmp_path / "a.json")])


def test_each_fall_is_told_by_its_rule_time_kick_and_state() -> None:
    """Three battery envs end, each by one rule, on a hand-made trace at 20 ms: env 1 dips to 0.59 m
    at step 30, 10 steps after its kick at step 20 (0.62 s, 0.20 s after it); env 4 slides at 1.3 m/s
    from step 60 with no kick (lateral, counted after its 0.7 s grace: from step 60, 1.22 s); env 8
    tilts to 0.9 at step 40 (0.82 s). The table says each in one line, and ``--table`` sums them by rule."""
    rule = ThresholdSet(name="eval", eval_success_height=0.6, tilt_xy_max=0.8, lateral_vel_max=1.15,
                        tilt_grace_s=0.4, lateral_grace_s=0.7)
    cfg = robust_gate_config(starts=2)
    n, t = cfg.num_envs, 100
    height, lateral, tilt = torch.full((t, n), 0.75), torch.zeros(t, n), torch.zeros(t, n)
    height[30:, 1] = 0.59
    lateral[60:, 4] = -1.3
    tilt[40:, 8] = 0.9
    trace = make_trace(t, n, base_height=height, lateral_vel=lateral, tilt_xy=tilt)
    trace.command = cfg.commands().expand(t, n, 3).clone()
    trace.action, trace.joint_vel = torch.zeros(t, n, 29), torch.zeros(t, n, 29)
    trace.pushed = torch.zeros(t, n, dtype=torch.bool)
    trace.pushed[20, 1] = True
    trace.pushed[80, 4] = True  # after its fall: no kick before it
    result = judge_gate(trace, rule, torch.tensor([0, 1, 2]), cfg)
    assert [(f["command"], f["env"], f["cause"]) for f in result.falls] == [
        ("forward 0.8", 1, "height"), ("turn left", 4, "lateral"), ("strafe 0.4", 8, "tilt")]
    height_fall, lateral_fall, tilt_fall = result.falls
    assert height_fall["time_s"] == pytest.approx(0.62) and height_fall["since_kick_s"] == pytest.approx(0.20)
    assert height_fall["root_height_m"] == pytest.approx(0.59)
    assert lateral_fall["time_s"] == pytest.approx(1.22) and lateral_fall["since_kick_s"] is None
    assert lateral_fall["lateral_speed_m_s"] == pytest.approx(1.3)
    assert tilt_fall["time_s"] == pytest.approx(0.82) and tilt_fall["tilt_xy"] == pytest.approx(0.9)
    table = result.format()
    assert ("fall: forward 0.8 (env 1): height at 0.62 s, 0.20 s after a kick; root 0.590 m, lateral speed 0.00 m/s, "
            "tilt 0.00") in table
    assert "fall: turn left (env 4): lateral at 1.22 s; root 0.750 m, lateral speed 1.30 m/s" in table
    assert result.as_dict()["falls"] == result.falls

    from isaac_adapter.app.bench import g1_gate

    twice = {"checkpoint": "runs/a.pt", "seeds": [result.as_dict(), {**result.as_dict(), "falls": [
        {**height_fall, "root_height_m": 0.5, "since_kick_s": 0.9}]}]}
    assert g1_gate.fall_causes(twice) == ("height 2 (root 0.500-0.590 m, 0.20-0.90 s after a kick), "
                                          "lateral 1 (root 0.750 m), tilt 1 (root 0.750 m)")
    assert g1_gate.fall_causes({"checkpoint": "runs/old.pt", "seeds": [{"lines": []}]}) == ""
    unkicked = {"checkpoint": "runs/b.pt", "seeds": [{"falls": [height_fall, {**height_fall, "since_kick_s": None}]}]}
    assert g1_gate.fall_causes(unkicked) == "height 2 (root 0.590 m, 1 of them 0.20 s after a kick)"


def test_a_record_whose_falls_are_not_as_json_writes_them_is_one_line(tmp_path) -> None:
    import json

    from isaac_adapter.app.bench import g1_gate

    lines = [{"name": "falls (battery, all starts)", "value": 1, "threshold": 1, "op": "<="}]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"checkpoint": "x.pt", "passed": True, "lines": lines,
                               "falls": [{"command": "stand", "cause": "height"}]}))
    with pytest.raises(SystemExit, match=r"^error: --table .*bad.json: a fall without env, time_s, since_kick_s, "
                                         r"root_height_m, lateral_speed_m_s, tilt_xy: not as --json writes falls"):
        g1_gate.main(["--table", str(bad)])
    bad.write_text(json.dumps({"checkpoint": "x.pt", "passed": True, "lines": lines, "falls": 5}))
    with pytest.raises(SystemExit, match=r"^error: --table .*bad.json: falls is not a list: not as --json writes falls"):
        g1_gate.main(["--table", str(bad)])
