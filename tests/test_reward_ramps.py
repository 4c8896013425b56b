"""Reward ramps (a curriculum of reward weights): the weight schedule, the rewards the G1 task pays
under it, its log, resume, validation, overrides and stored configs.

The reward is linear in each weight and the weights do not touch the physics, so three envs with
the same seed and actions, one at the start weight, one at the end weight and one ramping, must pay
``r_ramp = r_start + alpha * (r_end - r_start)`` at every step, with ``alpha`` worked out by hand.
"""

from __future__ import annotations

import dataclasses
import warnings

import pytest
import torch

from ppo_bootstrap.overrides import OverrideError, apply_overrides

from isaac_adapter.tasks.g1_walk import G1WalkEnv
from isaac_adapter.tasks.g1_walk.config import G1WalkConfig, RewardRamp, RewardWeights, stored_config

START, END = -0.01, -0.5
RAMP = RewardRamp("action_rate", END, start_step=3, end_step=7)
# alpha after env step c = 1..10: the start weight up to step 3, a quarter more each step, then the end
ALPHA = [0.0, 0.0, 0.0, 0.25, 0.5, 0.75, 1.0, 1.0, 1.0, 1.0]


def test_weight_schedule_by_hand() -> None:
    assert [RAMP.weight_at(START, c) for c in (0, 3, 4, 5, 6, 7, 100)] == pytest.approx(
        [-0.01, -0.01, -0.1325, -0.255, -0.3775, -0.5, -0.5]
    )
    switch = RewardRamp("ang_vel_xy", -0.2, start_step=10, end_step=10)  # Isaac Lab's modify_reward_weight
    assert (switch.weight_at(-0.05, 10), switch.weight_at(-0.05, 11)) == (-0.05, -0.2)
    cfg = G1WalkConfig(reward_ramps=(RAMP,))
    weights = cfg.reward_weights(5)
    assert weights["action_rate"] == pytest.approx(-0.255)
    assert {k: v for k, v in weights.items() if k != "action_rate"} == {
        k: v for k, v in dataclasses.asdict(RewardWeights()).items() if k != "action_rate"
    }


def test_the_device_schedule_is_the_python_one_at_every_step() -> None:
    """terms.ramped_weights over reward_ramp_table (what the env computes on the device) against
    reward_weights (Python numbers, float64), step by step through a ramp, a switch and the holds."""
    from isaac_adapter.tasks.g1_walk.terms import ramped_weights

    switch = RewardRamp("ang_vel_xy", -0.2, start_step=10, end_step=10)
    cfg = G1WalkConfig(reward_ramps=(RAMP, switch))
    table = torch.tensor(cfg.reward_ramp_table())
    names = list(RewardWeights.__dataclass_fields__)
    assert table.shape == (4, len(names))
    for step in range(0, 15):
        device = ramped_weights(table, torch.tensor(float(step)))
        python = torch.tensor([cfg.reward_weights(step)[name] for name in names])
        torch.testing.assert_close(device, python, rtol=1e-6, atol=1e-8, msg=f"step {step}")
    assert ramped_weights(table, torch.tensor(5.0))[names.index("action_rate")].item() == pytest.approx(-0.255)
    i = names.index("ang_vel_xy")
    assert [ramped_weights(table, torch.tensor(float(c)))[i].item() for c in (10, 11)] == pytest.approx([-0.05, -0.2])


def _env(ramps: tuple = (), action_rate: float = START) -> G1WalkEnv:
    cfg = G1WalkConfig(num_envs=4, seed=3, physics_threads=1, reward_ramps=ramps)
    cfg.rewards = dataclasses.replace(cfg.rewards, action_rate=action_rate)
    env = G1WalkEnv(cfg)
    env.reset(seed=3)
    return env


def test_the_ramped_reward_is_the_mix_of_the_two_fixed_weights() -> None:
    envs = {"start": _env(), "end": _env(action_rate=END), "ramp": _env((RAMP,))}
    gen = torch.Generator().manual_seed(0)
    spread = 0.0
    for c, alpha in enumerate(ALPHA, start=1):
        actions = torch.randn(4, envs["ramp"].num_actions, generator=gen)
        res = {name: env.step(actions) for name, env in envs.items()}
        assert torch.equal(res["start"].obs["policy"], res["ramp"].obs["policy"])  # weights do not move robots
        r0, r1 = res["start"].reward.double(), res["end"].reward.double()
        expected = r0 + alpha * (r1 - r0)
        assert torch.allclose(res["ramp"].reward.double(), expected, rtol=1e-6, atol=1e-7), c
        assert res["ramp"].info["log"]["Curriculum/action_rate"] == pytest.approx(START + alpha * (END - START))
        assert "Curriculum/action_rate" not in res["start"].info["log"]
        spread = max(spread, float((r1 - r0).abs().max()))
    assert spread > 1e-3  # the action-rate term paid something, so the check above had teeth


def test_a_resumed_env_continues_the_ramp() -> None:
    env = _env((RAMP,))
    for _ in range(4):
        env.step(torch.zeros(4, env.num_actions))
    state = env.state_dict()
    other = _env((RAMP,))
    assert other.common_step_counter == 0
    other.load_state_dict(state)
    assert other.common_step_counter == 4
    res = other.step(torch.zeros(4, other.num_actions))
    assert res.info["log"]["Curriculum/action_rate"] == pytest.approx(START + ALPHA[4] * (END - START))


# a ramp over the first 24 env steps: the weight after step c is START + c / 24 * (END - START)
LONG_RAMP = RewardRamp("action_rate", END, start_step=0, end_step=24)


def _ramp_runner(num_envs: int, seed: int):
    from ppo_bootstrap import PolicyConfig, Runner, RunnerConfig

    cfg = G1WalkConfig(num_envs=num_envs, seed=seed, physics_threads=1, reward_ramps=(LONG_RAMP,))
    cfg.rewards = dataclasses.replace(cfg.rewards, action_rate=START)
    return Runner(G1WalkEnv(cfg), RunnerConfig(num_steps_per_env=4, console=False, seed=seed,
                                               policy=PolicyConfig(actor_hidden=(16,), critic_hidden=(16,))))


@pytest.mark.parametrize("kind", ["full, another env count", "policy only"])
def test_a_resume_without_the_env_state_continues_the_curriculum_clock(tmp_path, capsys, kind) -> None:
    """The normalizer warm-up (4 steps) and two iterations of 4 steps: the env has stepped 12 times.
    A run that loads the checkpoint into envs of its own (another env count, or a policy-only file
    for fine-tuning) sets its env's counter to 12, so the ramp goes on at step 13, not at step 1."""
    source = _ramp_runner(num_envs=3, seed=0)
    source.learn(2)
    assert source.env_steps == source.env.common_step_counter == 12
    path = tmp_path / "model_2.pt"
    source.save(path)
    if kind == "policy only":  # as docs/checkpoints ships, and as files were before env_steps was saved
        full = torch.load(path, weights_only=False)
        torch.save({k: full[k] for k in ("policy", "config", "iteration", "total_steps")}, path)
    runner = _ramp_runner(num_envs=3 if kind == "policy only" else 4, seed=1)
    capsys.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the policy-only file has no checksum
        runner.load(path)
    assert "step counter (its curricula's clock) continues at 12" in capsys.readouterr().out
    assert runner.env_steps == runner.env.common_step_counter == 12
    res = runner.env.step(torch.zeros(runner.env.num_envs, runner.env.num_actions))
    assert res.info["log"]["Curriculum/action_rate"] == pytest.approx(START + 13 / 24 * (END - START))
    runner.learn(1)
    assert runner.env_steps == 16 and runner.env.common_step_counter == 17  # the step above is not the runner's


def test_an_exact_resume_restores_the_clock_with_the_env(tmp_path) -> None:
    source = _ramp_runner(num_envs=3, seed=0)
    source.learn(1)  # the warm-up and one iteration: 8 steps
    path = tmp_path / "model_1.pt"
    source.save(path)
    runner = _ramp_runner(num_envs=3, seed=0)
    runner.load(path)
    assert runner.env_steps == runner.env.common_step_counter == 8


@pytest.mark.parametrize(
    "ramp, message",
    [
        (RewardRamp("action_rates", -0.1, 0, 10), "no reward term 'action_rates'"),
        (RewardRamp("action_rate", -0.1, 10, 5), "0 <= start_step <= end_step"),
        (RewardRamp("action_rate", float("nan"), 0, 5), "finite"),
    ],
)
def test_bad_ramps_are_refused_by_name(ramp, message) -> None:
    with pytest.raises(ValueError, match=message) as err:
        G1WalkConfig(reward_ramps=(ramp,))
    assert str(err.value).startswith("reward_ramps:")


@pytest.mark.parametrize(
    "item",
    [1, {"term": "action_rate", "weight": -1, "start_step": 5},
     {"term": "action_rate", "weight": "x", "start_step": 0, "end_step": 1}],
)
def test_malformed_ramps_are_refused_in_one_line(item) -> None:
    with pytest.raises(ValueError, match=r"^reward_ramps: ") as err:
        G1WalkConfig(reward_ramps=(item,))
    assert "\n" not in str(err.value)


def test_one_ramp_per_term() -> None:
    with pytest.raises(ValueError, match="'action_rate' has more than one ramp"):
        G1WalkConfig(reward_ramps=(RAMP, RewardRamp("action_rate", -1.0, 8, 9)))


def test_from_the_command_line_and_back_from_a_checkpoint() -> None:
    text = "env.reward_ramps=[{term: action_rate, weight: -0.15, start_step: 2400, end_step: 7200}]"
    cfg = apply_overrides({"env": G1WalkConfig()}, [text])["env"]
    assert cfg.reward_ramps == (RewardRamp("action_rate", -0.15, 2400, 7200),)
    # a checkpoint records dataclasses.asdict of the config: the ramps come back as they were
    assert stored_config(dataclasses.asdict(cfg)).reward_ramps == cfg.reward_ramps
    with pytest.raises(OverrideError, match="override env.reward_ramps=.*no reward term 'smoothness'"):
        apply_overrides({"env": G1WalkConfig()}, ["env.reward_ramps=[{term: smoothness, weight: 1, start_step: 0, end_step: 1}]"])
