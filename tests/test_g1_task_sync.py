"""The G1 task's hooks never synchronise the host with the GPU (CUDA only; skipped elsewhere).

Runs every hook of a step, the episode-end snapshot and the selective reset under
``torch.cuda.set_sync_debug_mode("error")``, on a toy physics that lives on the GPU. What the env
adds around them (``check_actions``' finiteness check, the ``nonzero`` that lists the ended envs)
and the backends' resets are outside this test.
"""

from __future__ import annotations

import pytest
import torch

from isaac_adapter.backends.base import PhysicsState
from isaac_adapter.tasks.g1_walk import G1WalkEnv
from isaac_adapter.tasks.g1_walk.config import gait_clock_config

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

J, F = 29, 2


class DeviceToyBackend:
    """Open-loop physics on the GPU without host synchronisation: envs sink at a per-env rate."""

    def __init__(self, n: int, sim_dt: float, decimation: int) -> None:
        dev = self.device = torch.device("cuda", torch.cuda.current_device())
        self.num_envs, self.num_joints, self.num_feet, self.sim_dt, self.decimation = n, J, F, sim_dt, decimation
        self.qpos = torch.zeros(n, 7 + J, device=dev)
        self.qvel = torch.zeros(n, 6 + J, device=dev)
        self.torque = torch.zeros(n, J, device=dev)
        self.k = torch.zeros(n, device=dev)
        self.rate = torch.linspace(0.0, 0.03, n, device=dev)

    def state(self) -> PhysicsState:
        n, k = self.num_envs, self.k
        root = self.qpos[:, :3].clone()
        root[:, 2] -= self.rate * k
        contact = torch.stack([torch.sin(0.25 * k) > 0, torch.cos(0.25 * k) > 0], -1)
        return PhysicsState(
            root_pos_w=root, root_quat_w=self.qpos[:, 3:7].clone(), root_lin_vel_w=self.qvel[:, :3].clone(),
            root_ang_vel_w=self.qvel[:, 3:6].clone(), joint_pos=self.qpos[:, 7:].clone(),
            joint_vel=self.qvel[:, 6:].clone(), applied_torque=self.torque.clone(), foot_contact=contact,
            foot_pos_w=torch.zeros(n, F, 3, device=self.device), foot_lin_vel_w=torch.zeros(n, F, 3, device=self.device),
            com_pos_w=root.clone(),
        )  # fmt: skip

    def step(self, targets: torch.Tensor) -> None:
        old = self.qpos[:, 7:].clone()
        self.qpos[:, 7:] += 0.3 * (targets - old)
        self.qvel[:, 6:] = (self.qpos[:, 7:] - old) / (self.sim_dt * self.decimation)
        self.torque = 40.0 * (targets - self.qpos[:, 7:])
        self.k += 1

    def reset_envs(self, env_ids: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        self.k.index_fill_(0, env_ids, 0)
        self.qpos[env_ids] = qpos
        self.qvel[env_ids] = qvel
        self.torque.index_fill_(0, env_ids, 0)

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


@pytest.mark.parametrize("resampling", [None, (0.1, 0.3)])
def test_a_step_and_its_resets_do_not_synchronise(resampling) -> None:
    n = 256
    cfg = gait_clock_config(num_envs=n, device="cuda", episode_length_s=1.0, resampling_time_range=resampling)
    nominal = torch.zeros(7 + J)
    nominal[2], nominal[3] = 0.78, 1.0
    names = tuple(f"left_hip_{i}_joint" if i < 12 else f"waist_{i}_joint" for i in range(J))
    env = G1WalkEnv(cfg, backend=DeviceToyBackend(n, cfg.sim_dt, cfg.decimation), nominal_qpos=nominal, joint_names=names)
    env.reset()
    actions = 0.3 * torch.randn(n, J, device="cuda")
    ends = 0
    for step in range(60):
        torch.cuda.set_sync_debug_mode("error")
        try:
            env._pre_physics_step(actions)
            env._apply_action()
            env.episode_length_buf += 1
            env.reset_terminated, env.reset_time_outs = env._get_dones()
            env._get_rewards()
            env._get_observations()
            env._step_log(env.reset_time_outs)
            env._last_episode_log()
        finally:
            torch.cuda.set_sync_debug_mode(0)
        ended = torch.nonzero(env.reset_terminated | env.reset_time_outs).flatten()  # the env's sync
        ends += ended.numel()
        if ended.numel():
            torch.cuda.set_sync_debug_mode("error")
            try:
                env._record_episode_end(ended)
                env._reset_idx(ended)
                env._get_observations()
            finally:
                torch.cuda.set_sync_debug_mode(0)
    assert ends > n  # falls (sinking envs) and timeouts (50 steps) both happened
