"""The checkpoints shipped in docs/ walk on the CPU MuJoCo backend: sim-to-sim, one was trained on
MuJoCo Warp, the other on Isaac Lab (``G1WalkDirectEnv`` on the converted USD, the same task and
observation layout).

A regression test of the whole stack behind it: task observations and the gait clock, the physics
backend, checkpoint loading and the evaluator. Acceptance thresholds are written out here as the
task's acceptance criteria state them, not read back from the evaluator's defaults.
"""

import os

import pytest
import torch

from isaac_adapter.evaluation import ActorCriticPolicy, EvalConfig, Evaluator
from isaac_adapter.evaluation.judge import FALL
from isaac_adapter.tasks.g1_walk import G1WalkEnv
from isaac_adapter.tasks.registry import checkpoint_walk_config
from isaac_adapter.evaluation.g1_probe import G1WalkProbe

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECKPOINT = os.path.join(ROOT, "docs", "checkpoints", "g1_clock_it1296.pt")
ISAAC_LAB_TRAINED = os.path.join(ROOT, "docs", "checkpoints", "g1_isaaclab_it695.pt")


@pytest.mark.parametrize(
    "checkpoint, command",
    [(CHECKPOINT, (0.5, 0.0, 0.0)), (CHECKPOINT, (0.3, 0.2, 0.3)), (ISAAC_LAB_TRAINED, (0.5, 0.0, 0.0))],
    ids=["mujoco-forward", "mujoco-mixed", "isaaclab-forward"],
)
@torch.no_grad()
def test_shipped_policy_walks_for_15_s_without_a_fall(checkpoint, command) -> None:
    # the task the checkpoint recorded: the gait clock, and the command settings it was trained with
    env = G1WalkEnv(checkpoint_walk_config(checkpoint, num_envs=6, seed=0))
    evaluator = Evaluator(G1WalkProbe(env), EvalConfig(horizon_s=15.0, seed=0, commands=command))
    obs = env.reset(seed=0)
    report = evaluator.evaluate(ActorCriticPolicy.from_checkpoint(checkpoint, obs, env.num_actions))

    assert not bool((report.judgement.outcome == FALL).any()), "a robot fell (eval_success_height 0.60 m)"
    gait = report.gait
    assert bool((gait.window_s == 15.0).all())
    assert float(gait.mean_air_time_s.mean()) >= 0.2
    assert float(gait.double_support_ratio.mean()) <= 0.5
    assert 1.0 <= float(gait.step_frequency_hz.mean()) <= 3.0
    assert float(gait.velocity_tracking_error.mean()) <= 0.15
    if command[2] == 0.0:  # straight: it covers about the commanded distance (a turn's chord is shorter)
        speed = (command[0] ** 2 + command[1] ** 2) ** 0.5
        assert float(gait.displacement_m.mean()) > 0.8 * speed * 15.0
    assert report.verdict()["accepted"]


def _strings(value, where=""):
    """Every string under ``value`` (dicts, lists, tuples), with where it sits."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{where}.{key}")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _strings(item, f"{where}[{i}]")
    elif isinstance(value, str):
        yield where, value


SHIPPED = sorted(os.path.relpath(os.path.join(d, f), ROOT) for d, _, files in os.walk(os.path.join(ROOT, "docs"))
                 for f in files if f.endswith(".pt"))  # the featured ones and those of the benchmark records


@pytest.mark.parametrize("name", SHIPPED)
def test_a_shipped_checkpoint_names_no_path_of_the_machine_that_trained_it(name) -> None:
    """What a checkpoint records (its run folder in the config, the task) is relative to the project:
    an absolute path would name the machine it was trained on and mean nothing on the user's."""
    ckpt = torch.load(os.path.join(ROOT, name), map_location="cpu", weights_only=False)
    absolute = [(where, text) for where, text in _strings({k: v for k, v in ckpt.items() if k != "policy"})
                if os.path.isabs(text)]
    assert not absolute, absolute
