"""The evaluator on scripted envs: first-done freeze, terminations vs timeouts, terminal snapshot."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from ppo_bootstrap.env import POLICY, StepResult

from isaac_adapter.backends.base import PhysicsState
from isaac_adapter.evaluation import EpisodeDatasetWriter, EvalConfig, Evaluator, read_episodes, zero_policy
from isaac_adapter.evaluation.judge import FALL, SURVIVED, TIMEOUT, ThresholdSet
from isaac_adapter.evaluation.trace import StepSample
from isaac_adapter.tasks.g1_walk import G1WalkConfig, G1WalkEnv
from isaac_adapter.tasks.g1_walk.causes import CAUSE_NAMES
from isaac_adapter.evaluation.g1_probe import G1WalkProbe

DT = 0.02


class FallingEnv:
    """3 envs walking along x at 0.1 m per step, 0.75 m high; observation ``[x, height]``.

    env 0 falls (height 0.2, terminated) at steps 3 and 7 and, once respawned, moves 1 m per step;
    env 1 times out at step 5; env 2 never ends. Same-step auto-reset to x = 0, 0.75 m; the
    pre-reset state of ended envs is kept in ``terminal_*`` (as the G1 env keeps its snapshot).
    """

    num_envs, num_actions, device = 3, 1, torch.device("cpu")

    def reset(self):
        self.t = 0
        self.x = torch.zeros(3)
        self.height = torch.full((3,), 0.75)
        self.speed = torch.full((3,), 0.1)
        self.terminal_x, self.terminal_height = self.x.clone(), self.height.clone()
        return self.obs()

    def obs(self):
        return {POLICY: torch.stack([self.x, self.height], dim=-1)}

    def step(self, actions):
        self.x = self.x + self.speed
        terminated = torch.zeros(3, dtype=torch.bool)
        truncated = torch.zeros(3, dtype=torch.bool)
        cause = torch.zeros(3, dtype=torch.long)
        if self.t in (3, 7):
            self.height[0], terminated[0], cause[0] = 0.2, True, 1
        if self.t == 5:
            truncated[1], cause[1] = True, 4
        ended = torch.nonzero(terminated | truncated).flatten()
        final_obs = {k: v[ended] for k, v in self.obs().items()}
        self.terminal_x[ended], self.terminal_height[ended] = self.x[ended], self.height[ended]
        self.x[ended], self.height[ended] = 0.0, 0.75
        self.speed[0] = 1.0 if self.t >= 3 else 0.1  # the respawned env 0 runs far: it must not count
        self.t += 1
        return StepResult(self.obs(), torch.ones(3), terminated, truncated, final_obs, ended,
                          {"termination_cause": cause})


class FallingProbe:
    """:class:`EvalProbe` of :class:`FallingEnv`."""

    dt, cause_names = DT, CAUSE_NAMES
    training_rule = ThresholdSet("train rule 0.25 m", eval_success_height=0.25)
    evaluation_rule = ThresholdSet("eval 0.60 m", eval_success_height=0.60)

    def __init__(self, env: FallingEnv) -> None:
        self.env = env

    def reset(self, seed: int, commands: torch.Tensor | None):
        return self.env.reset()

    def _sample(self, x: torch.Tensor, height: torch.Tensor, cause: torch.Tensor) -> StepSample:
        n = self.env.num_envs
        return StepSample(
            root_pos_w=torch.stack([x, torch.zeros(n), height], dim=-1), tilt_xy=torch.zeros(n),
            lin_vel_b=torch.zeros(n, 3), ang_vel_b=torch.zeros(n, 3), foot_contact=torch.ones(n, 2, dtype=torch.bool),
            torque=torch.zeros(n, 1), command=torch.tensor([0.5, 0.0, 0.0]).repeat(n, 1), env_cause=cause,
        )

    def current(self) -> StepSample:
        return self._sample(self.env.x, self.env.height, torch.zeros(3, dtype=torch.long))

    def after_step(self, result: StepResult) -> StepSample:
        ids = result.final_env_ids
        x, height = self.env.x.clone(), self.env.height.clone()
        x[ids], height[ids] = self.env.terminal_x[ids], self.env.terminal_height[ids]
        return self._sample(x, height, result.info["termination_cause"])


def test_first_done_freeze_and_outcomes():
    evaluator = Evaluator(FallingProbe(FallingEnv()), EvalConfig(horizon_s=10 * DT, commands=None))
    report = evaluator.evaluate(zero_policy(1))
    # env 0: steps 0..3 at 0.1 m/step -> 0.4 m in 0.08 s; the respawn's 1 m/steps and its second fall never count
    assert report.gait.displacement_m.tolist() == pytest.approx([0.4, 0.6, 1.0])
    assert report.gait.window_s.tolist() == pytest.approx([4 * DT, 6 * DT, 10 * DT])
    assert report.judgement.outcome.tolist() == [FALL, TIMEOUT, SURVIVED]
    assert report.judgement.end_step.tolist() == [3, 5, -1]
    assert CAUSE_NAMES[int(report.judgement.cause[0])] == "height"
    summary = report.summary()
    assert (summary["fall_rate"], summary["timeout_rate"], summary["survivor_rate"]) == pytest.approx((1 / 3, 1 / 3, 1 / 3))
    # terminal metrics from the pre-reset state: 0.2 m, not the 0.75 m respawn
    assert report.terminal.height.tolist() == pytest.approx([0.2, 0.75, 0.75])
    assert report.env_mismatches == []
    for row in report.sweep.rows:
        assert row.falls == 1 and row.timeouts == 1


def test_progress_counts_steps_and_sets_and_changes_no_number(capsys):
    cfg = EvalConfig(horizon_s=10 * DT, commands=None)
    quiet = Evaluator(FallingProbe(FallingEnv()), cfg).evaluate(zero_policy(1), sweep_heights=(0.5, 0.45))
    assert capsys.readouterr().err == ""  # off by default
    calls = []
    shown = Evaluator(FallingProbe(FallingEnv()), cfg, progress=lambda done, total: calls.append((done, total)))
    report = shown.evaluate(zero_policy(1), sweep_heights=(0.5, 0.45))
    # 10 steps (env 2 never ends: no early stop), then 4 sets: training rule, evaluation rule, 2 heights
    assert calls == [(k, 10) for k in range(1, 11)] + [(k, 4) for k in range(1, 5)]
    assert report.trace.fingerprint() == quiet.trace.fingerprint()
    assert report.summary() == quiet.summary()
    assert report.format() == quiet.format()

    Evaluator(FallingProbe(FallingEnv()), cfg, progress=True).evaluate(zero_policy(1))
    err = capsys.readouterr().err
    assert "evaluate" in err and "10/10" in err and "sweep" in err


def test_dataset_from_the_evaluator_separates_episodes(tmp_path):
    evaluator = Evaluator(FallingProbe(FallingEnv()), EvalConfig(horizon_s=10 * DT, commands=None))
    with EpisodeDatasetWriter(tmp_path / "e.parquet", 3, DT, cause_names=CAUSE_NAMES) as writer:
        trace = evaluator.rollout(zero_policy(1), recorder=writer)
    assert trace.num_steps == 10
    episodes = {e.episode_id: e for e in read_episodes(tmp_path / "e.parquet")}
    # new ids in order of the ends: env 0 at step 3 -> 3, env 1 at step 5 -> 4, env 0 at step 7 -> 5
    assert {i: (e.env_id, e.length) for i, e in episodes.items()} == {
        0: (0, 4), 1: (1, 6), 2: (2, 10), 3: (0, 4), 4: (1, 4), 5: (0, 2)}
    assert episodes[0].termination_cause == "height" and episodes[0].terminal_observation.tolist() == pytest.approx([0.4, 0.2])
    # the post-reset step of env 0 opens episode 3 at the respawn, it does not continue episode 0
    assert episodes[3].rollout_step[0] == 4 and episodes[3].observation[0].tolist() == pytest.approx([0.0, 0.75])
    assert episodes[1].truncated[-1] and not episodes[1].terminated[-1] and episodes[1].termination_cause == "timeout"


# -- the G1 env and its probe, on a scripted physics backend ---------------------------------------

J, F = 29, 2
NOMINAL = torch.cat([torch.tensor([0.0, 0.0, 0.75, 1.0, 0.0, 0.0, 0.0]), torch.zeros(J)])


class HoldBackend:
    """Physics stand-in: every env holds what ``reset_envs`` wrote; ``drop[env] = step`` puts the root at
    0.2 m from that step of the env's episode on, and walks it 0.05 m per step along x."""

    def __init__(self, num_envs: int, drop: dict[int, int]) -> None:
        self.num_envs, self.num_joints, self.num_feet = num_envs, J, F
        self.sim_dt, self.decimation, self.device = 0.005, 4, torch.device("cpu")
        self.steps = torch.zeros(num_envs, dtype=torch.long)
        self.drop = drop
        self.root = torch.zeros(num_envs, 7)

    def state(self) -> PhysicsState:
        n = self.num_envs
        pos = self.root[:, :3].clone()
        pos[:, 0] = 0.05 * self.steps.float()
        for env, step in self.drop.items():
            if self.steps[env] >= step:
                pos[env, 2] = 0.2
        return PhysicsState(
            root_pos_w=pos, root_quat_w=self.root[:, 3:7].clone(), root_lin_vel_w=torch.zeros(n, 3),
            root_ang_vel_w=torch.zeros(n, 3), joint_pos=torch.zeros(n, J), joint_vel=torch.zeros(n, J),
            applied_torque=torch.zeros(n, J), foot_contact=torch.ones(n, F, dtype=torch.bool),
            foot_pos_w=torch.zeros(n, F, 3), foot_lin_vel_w=torch.zeros(n, F, 3), com_pos_w=torch.zeros(n, 3),
        )

    def step(self, joint_pos_targets: torch.Tensor) -> None:
        self.steps += 1

    def reset_envs(self, env_ids: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        self.steps[env_ids] = 0
        self.root[env_ids] = qpos[:, :7]

    def state_dict(self) -> dict[str, Any]:
        return {"steps": self.steps.clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.steps = state["steps"].clone()


def g1_env(num_envs: int, drop: dict[int, int]) -> G1WalkEnv:
    cfg = G1WalkConfig(num_envs=num_envs, joint_pos_noise=0.0)
    return G1WalkEnv(cfg, backend=HoldBackend(num_envs, drop), nominal_qpos=NOMINAL,
                     joint_names=tuple(f"j{i}" for i in range(J)))


class PostResetProbe(G1WalkProbe):
    """The mistake the notes describe: reading the robot after the same-step reset."""

    def after_step(self, result: StepResult) -> StepSample:
        env = self.env
        return self._sample(env.state, env.command.clone(), result.info["termination_cause"].clone())


def test_g1_terminal_metrics_come_from_the_snapshot():
    env = g1_env(2, drop={1: 3})  # env 1 collapses to 0.2 m at its step 3 (index 2) and respawns at 0.75 m
    report = Evaluator(G1WalkProbe(env), EvalConfig(horizon_s=0.2)).evaluate(zero_policy(J))
    assert report.trace.terminated[2].tolist() == [False, True]
    assert report.terminal.height.tolist() == pytest.approx([0.75, 0.2])
    # displacement stops at the fall: 3 steps of 0.05 m; the respawned env 1 keeps walking, uncounted
    assert report.gait.displacement_m.tolist() == pytest.approx([0.5, 0.15])
    assert report.judgement.end_step.tolist() == [-1, 2]
    assert CAUSE_NAMES[int(report.judgement.cause[1])] == "height"
    assert report.env_mismatches == []
    assert (report.trace.command[0] == torch.tensor([0.5, 0.0, 0.0])).all()  # fixed commands held

    # reading the post-reset state instead loses the fall: the env check says so
    wrong = Evaluator(PostResetProbe(g1_env(2, drop={1: 3})), EvalConfig(horizon_s=0.2)).evaluate(zero_policy(J))
    assert wrong.terminal.height.tolist() == pytest.approx([0.75, 0.75])
    assert wrong.env_mismatches == [1]


def test_same_seed_same_rollout():
    env = g1_env(2, drop={})
    evaluator = Evaluator(G1WalkProbe(env), EvalConfig(horizon_s=0.1, seed=3, commands=None))
    first = evaluator.rollout(zero_policy(J))
    second = evaluator.rollout(zero_policy(J))
    assert first.fingerprint() == second.fingerprint()


def test_checkpoint_policy_acts_like_the_trained_one(tmp_path):
    from ppo_bootstrap import PolicyConfig, PPOConfig, Runner, RunnerConfig

    from ppo_bootstrap.checkpoint import load_policy

    from isaac_adapter.evaluation import ActorCriticPolicy

    env = FallingEnv()
    cfg = RunnerConfig(num_steps_per_env=4, console=False, ppo=PPOConfig(num_mini_batches=1),
                       policy=PolicyConfig(actor_hidden=(8,), critic_hidden=(8,), recurrent="gru", rnn_hidden=8))
    runner = Runner(env, cfg)
    runner.learn(1)
    runner.save(tmp_path / "model_1.pt")
    obs = env.reset()
    policy = ActorCriticPolicy(load_policy(tmp_path / "model_1.pt", obs, 1), 3)
    expected, state = runner.policy.act_inference(obs[POLICY], runner.policy.initial_state(3, torch.device("cpu"))[0])
    assert torch.allclose(policy(obs), expected)
    policy.reset(torch.tensor([True, False, False]))  # memory of an ended env restarts from zero
    assert policy.state[:, 0].abs().sum() == 0 and torch.allclose(policy.state[:, 1:], state[:, 1:])
