"""The task's domain randomization on Isaac Lab's ``DirectRLEnv`` (``G1WalkDirectEnv``), kit-less on
CPU: the same ``RandomizationCfg`` the MuJoCo backends read, written through the articulation's
setters. Run through ``scripts/isaaclab_tier.sh``."""

from __future__ import annotations

import pytest
import torch

from isaac_adapter.tasks.g1_walk import G1WalkConfig
from isaac_adapter.tasks.g1_walk.randomization import RandomizationCfg


def build(num_envs: int, **randomization):
    from isaac_adapter.isaaclab.g1_direct import make_g1_direct_env

    task = G1WalkConfig(num_envs=num_envs, device="cpu", randomization=RandomizationCfg(**randomization))
    return make_g1_direct_env(task)


def test_a_reset_draws_masses_and_gains_for_the_ended_envs_only():
    env = build(4, link_mass_scale=(0.8, 1.2), kp_scale=(0.5, 1.5))
    task = env.unwrapped
    env.reset()
    before = {k: v.clone() for k, v in task.physics_params.items()}
    mass_before = task.robot.data.body_mass.clone() if hasattr(task.robot.data.body_mass, "clone") else None
    task._reset_idx(torch.tensor([0, 2]))
    for name, value in task.physics_params.items():
        assert torch.equal(value[[1, 3]], before[name][[1, 3]]) and not torch.equal(value[[0, 2]], before[name][[0, 2]])
    from isaac_adapter.isaaclab.robot import as_torch

    mass = as_torch(task.robot.data.body_mass)[:, task._link_ids]
    torch.testing.assert_close(mass, task._nominal["mass"][:, task._link_ids] * task.physics_params["link_mass_scale"])
    if mass_before is not None:
        assert torch.equal(as_torch(mass_before)[[1, 3]][:, task._link_ids], mass[[1, 3]])


def test_a_push_adds_the_kick_to_the_chosen_envs():
    env = build(3, push_interval_s=(1.0, 2.0), push_velocity=(-0.5, 0.5))
    task = env.unwrapped
    env.reset()
    task.push_steps_left = torch.tensor([1, 30, 30], device=task.device)
    env.step(torch.zeros(3, env.num_actions, device=task.device))
    assert (task.last_push[0, :2] != 0).all() and torch.equal(task.last_push[1:], torch.zeros_like(task.last_push[1:]))


def test_friction_randomization_is_refused_in_one_line():
    with pytest.raises(ValueError, match=r"^randomization\.friction: Isaac Lab"):
        build(2, friction=(0.4, 1.0))
