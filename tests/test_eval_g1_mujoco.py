"""The evaluator on the real G1 env (MuJoCo, CPU): few envs, a short horizon."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("mujoco")

from isaac_adapter.evaluation import EpisodeDatasetWriter, EvalConfig, Evaluator, read_episodes, zero_policy  # noqa: E402
from isaac_adapter.tasks.g1_walk import G1WalkConfig, G1WalkEnv  # noqa: E402
from isaac_adapter.evaluation.g1_probe import G1WalkProbe  # noqa: E402


def test_zero_policy_on_mujoco(tmp_path):
    env = G1WalkEnv(G1WalkConfig(num_envs=4, physics_threads=1))
    probe = G1WalkProbe(env)
    evaluator = Evaluator(probe, EvalConfig(horizon_s=2.0))
    with EpisodeDatasetWriter(tmp_path / "g1.parquet", 4, probe.dt, cause_names=probe.cause_names) as writer:
        report = evaluator.evaluate(zero_policy(env.num_actions), sweep_heights=(0.5,), recorder=writer)
    # the post-hoc training rule sees exactly the ends the env reported (so the trace is pre-reset)
    assert report.env_mismatches == []
    trace = report.trace
    assert trace.num_steps == 100 and torch.isfinite(trace.root_pos_w).all()
    ended = trace.first_done_step() >= 0
    spawn_height = float(env.nominal_qpos[2])
    for n in torch.nonzero(ended).flatten().tolist():  # a fall's terminal height is not the spawn height
        assert abs(float(report.terminal.height[n]) - spawn_height) > 1e-3
    episodes = read_episodes(tmp_path / "g1.parquet")
    assert sum(e.length for e in episodes) == 4 * 100
    assert sum(e.ended for e in episodes) == int(trace.terminated.sum() + (trace.truncated & ~trace.terminated).sum())
    assert [row.thresholds.name for row in report.sweep.rows] == ["train rule 0.25 m", "eval 0.60 m", "eval 0.50 m"]
