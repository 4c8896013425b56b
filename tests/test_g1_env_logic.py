"""G1 walk env bookkeeping on a scripted physics backend: exact end steps, causes, first crossings.

The backend below keeps each env's state fixed at what ``reset_envs`` wrote, except for scripted
overrides that switch on at a given step of that env; so every end step is known in advance.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from ppo_bootstrap.episode import sparse, validate_step

from isaac_adapter.backends.base import PhysicsState
from isaac_adapter.tasks.g1_walk import G1WalkConfig, G1WalkEnv, causes

J, F = 29, 2
NOMINAL = torch.cat([torch.tensor([0.0, 0.0, 0.75, 1.0, 0.0, 0.0, 0.0]), torch.zeros(J)])
TILTED = [math.cos(math.radians(35)), math.sin(math.radians(35)), 0.0, 0.0]  # 70 deg roll: tilt_xy 0.883


class ScriptedBackend:
    """Physics stand-in: ``overrides[(env, from_step)] = {field: value}`` applies from that env step on."""

    def __init__(self, num_envs: int, sim_dt: float = 0.005, decimation: int = 4) -> None:
        self.num_envs, self.num_joints, self.num_feet = num_envs, J, F
        self.sim_dt, self.decimation, self.device = sim_dt, decimation, torch.device("cpu")
        self.steps = torch.zeros(num_envs, dtype=torch.long)
        self.base = PhysicsState(
            root_pos_w=torch.zeros(num_envs, 3),
            root_quat_w=torch.tensor([1.0, 0.0, 0.0, 0.0]).repeat(num_envs, 1),
            root_lin_vel_w=torch.zeros(num_envs, 3),
            root_ang_vel_w=torch.zeros(num_envs, 3),
            joint_pos=torch.zeros(num_envs, J),
            joint_vel=torch.zeros(num_envs, J),
            applied_torque=torch.zeros(num_envs, J),
            foot_contact=torch.ones(num_envs, F, dtype=torch.bool),
            foot_pos_w=torch.zeros(num_envs, F, 3),
            foot_lin_vel_w=torch.zeros(num_envs, F, 3),
            com_pos_w=torch.zeros(num_envs, 3),
        )
        self.overrides: dict[tuple[int, int], dict[str, Any]] = {}

    def state(self) -> PhysicsState:
        s = PhysicsState(**{k: v.clone() for k, v in self.base.as_dict().items()})
        for (env, from_step), values in self.overrides.items():
            if self.steps[env] >= from_step:
                for name, value in values.items():
                    getattr(s, name)[env] = torch.as_tensor(value, dtype=getattr(s, name).dtype)
        return s

    def step(self, joint_pos_targets: torch.Tensor) -> None:
        self.steps += 1

    def reset_envs(self, env_ids: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        self.steps[env_ids] = 0
        self.base.root_pos_w[env_ids] = qpos[:, :3]
        self.base.root_quat_w[env_ids] = qpos[:, 3:7]
        self.base.joint_pos[env_ids] = qpos[:, 7:]
        self.base.root_lin_vel_w[env_ids] = qvel[:, :3]

    def state_dict(self) -> dict[str, Any]:
        return {"steps": self.steps.clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.steps = state["steps"].clone()


def make_env(num_envs: int, **cfg: Any) -> tuple[G1WalkEnv, ScriptedBackend]:
    config = G1WalkConfig(num_envs=num_envs, joint_pos_noise=0.0, **cfg)
    backend = ScriptedBackend(num_envs, config.sim_dt, config.decimation)
    env = G1WalkEnv(config, backend=backend, nominal_qpos=NOMINAL, joint_names=tuple(f"j{i}" for i in range(J)))
    env.reset()
    return env, backend


def run_until_done(env: G1WalkEnv, max_steps: int) -> list[tuple[int, Any]]:
    """Step with zero actions; return ``(step, StepResult)`` for every step where some env ended."""
    ends = []
    for step in range(1, max_steps + 1):
        result = sparse(env.step(torch.zeros(env.num_envs, env.num_actions)))
        validate_step(env.num_envs, result)
        if result.final_env_ids.numel():
            ends.append((step, result))
    return ends


def test_timeout_exactly_at_step_1000_and_never_a_fall() -> None:
    env, _ = make_env(2)
    ends = run_until_done(env, 1001)
    assert [step for step, _ in ends] == [1000]
    result = ends[0][1]
    assert result.truncated.tolist() == [True, True]
    assert result.terminated.tolist() == [False, False]
    assert result.final_env_ids.tolist() == [0, 1]
    assert result.info["termination_cause"].tolist() == [causes.CAUSE_TIMEOUT] * 2
    assert result.info["log"]["Episode_Termination/timeout"] == 2.0
    assert env.last_episode_length.tolist() == [1000, 1000]
    assert env.last_first_active_step.tolist() == [[-1, -1, -1]] * 2
    assert env.episode_step.tolist() == [1, 1]  # the step after the timeout is step 1 of the new episode


@pytest.mark.parametrize("decimation, tilt_end, lateral_end", [(4, 20, 35), (2, 40, 70), (8, 10, 18)])
def test_grace_boundaries_in_the_env(decimation: int, tilt_end: int, lateral_end: int) -> None:
    # env 0: height under 0.25 m from step 1; env 1: tilted from step 1; env 2: sliding sideways from step 1;
    # env 3: sliding at 1.10 m/s (under the limit) -> runs to the timeout
    env, backend = make_env(4, decimation=decimation)
    backend.overrides[(0, 1)] = {"root_pos_w": [0.0, 0.0, 0.24]}
    backend.overrides[(1, 1)] = {"root_quat_w": TILTED}
    backend.overrides[(2, 1)] = {"root_lin_vel_w": [0.0, 1.2, 0.0]}
    backend.overrides[(3, 1)] = {"root_lin_vel_w": [0.0, 1.1, 0.0]}
    first_end: dict[int, int] = {}
    for step in range(1, lateral_end + 2):
        result = sparse(env.step(torch.zeros(4, J)))
        for env_id in result.final_env_ids.tolist():
            first_end.setdefault(env_id, step)
            assert result.terminated[env_id] and not result.truncated[env_id]
        if step == tilt_end:
            assert env.last_cause[1] == causes.CAUSE_TILT
            assert env.last_first_raw_step[1].tolist() == [-1, 1, -1]  # crossed during grace, recorded
            assert env.last_first_active_step[1].tolist() == [-1, tilt_end, -1]
            # the snapshot keeps the tilted pose; the live state is the upright spawn
            assert env.terminal_state.root_quat_w[1].tolist() == pytest.approx(TILTED)
        if step == lateral_end:
            assert env.last_cause[2] == causes.CAUSE_LATERAL
            assert env.last_first_raw_step[2].tolist() == [-1, -1, 1]
            assert env.last_first_active_step[2].tolist() == [-1, -1, lateral_end]
    assert first_end == {0: 1, 1: tilt_end, 2: lateral_end}
    assert env.last_cause[0] == causes.CAUSE_HEIGHT
    assert env.last_first_active_step[0].tolist() == [1, -1, -1]


def test_cause_is_exclusive_and_every_first_crossing_is_kept() -> None:
    env, backend = make_env(3)
    # env 0: tilt from step 5, lateral from step 10 -> tilt ends it at 20; lateral crossed but never active.
    # The lateral rule reads the body frame: rolled 70 deg, body -y is world (0, -cos 70, -sin 70).
    roll = math.radians(70)
    backend.overrides[(0, 5)] = {"root_quat_w": TILTED}
    backend.overrides[(0, 10)] = {"root_lin_vel_w": [0.0, -1.3 * math.cos(roll), -1.3 * math.sin(roll)]}
    # env 1: all three from step 36 -> all active at 36, height wins
    backend.overrides[(1, 36)] = {"root_pos_w": [0.0, 0.0, 0.1], "root_quat_w": TILTED}
    ends = run_until_done(env, 40)
    steps = {step: result.final_env_ids.tolist() for step, result in ends}
    assert steps[20] == [0]
    assert env.last_cause[0] == causes.CAUSE_TILT
    assert env.last_first_raw_step[0].tolist() == [-1, 5, 10]
    assert env.last_first_active_step[0].tolist() == [-1, 20, -1]
    # env 1: z=0.1 and 70 deg roll; the world velocity (0,0,0) -> lateral not crossed
    assert steps[36] == [1]
    assert env.last_cause[1] == causes.CAUSE_HEIGHT
    assert env.last_first_active_step[1].tolist() == [36, 36, -1]


def test_fall_on_the_timeout_step_reports_both_flags() -> None:
    env, backend = make_env(2)
    backend.overrides[(0, 1000)] = {"root_quat_w": TILTED}
    ends = run_until_done(env, 1000)
    assert [step for step, _ in ends] == [1000]
    result = ends[0][1]
    assert result.terminated.tolist() == [True, False]
    assert result.truncated.tolist() == [True, True]
    assert result.info["termination_cause"].tolist() == [causes.CAUSE_TILT, causes.CAUSE_TIMEOUT]
    assert result.info["log"]["Episode_Termination/time_out_and_fall"] == 1.0


def test_final_env_ids_ascending_and_final_obs_rows_match() -> None:
    env, backend = make_env(5)
    for env_id in (4, 1, 3):
        backend.overrides[(env_id, 1)] = {"root_pos_w": [0.0, 0.0, 0.1 + 0.01 * env_id]}
    result = sparse(env.step(torch.zeros(5, J)))
    assert result.final_env_ids.tolist() == [1, 3, 4]
    # critic column of the root height: 9 + 3J (policy) + 3 (body lin vel)
    height_col = 9 + 3 * J + 3
    assert result.final_obs["critic"][:, height_col].tolist() == pytest.approx([0.11, 0.13, 0.14])
    assert result.obs["critic"][[1, 3, 4], height_col].tolist() == pytest.approx([0.75] * 3)
