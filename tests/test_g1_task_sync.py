"""A G1 env step, with its episode-end snapshots and the reset by mask, never synchronises the host
with the GPU.

On CUDA the whole ``env.step`` runs under ``torch.cuda.set_sync_debug_mode("error")``, on a toy
physics that lives on the GPU and resets by mask as MuJoCo Warp does. On the CPU (so in CI) the same
step runs under a dispatch mode that fails on the operators that would synchronise on a GPU
(``nonzero``, ``.item()`` / ``bool()`` of a tensor, boolean-mask indexing, ``torch.equal``, ...).
The finiteness check of the actions is switched off as ``--no-validate`` does; the backend's
health check, every ``check_every`` steps, is the backend's.
"""

from __future__ import annotations

import contextlib

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from isaac_adapter.backends.base import PhysicsState
from isaac_adapter.tasks.g1_walk import G1WalkEnv
from isaac_adapter.tasks.g1_walk.config import gait_clock_config

J, F = 29, 2
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"))]
aten = torch.ops.aten
# operators whose result size or value the host must wait for on a GPU
SYNCING = {aten.nonzero, aten.nonzero_numpy, aten._local_scalar_dense, aten.is_nonzero, aten.equal,
           aten.masked_select, aten.unique_dim, aten._unique2, aten.argwhere, aten.item}


class FailOnSyncingOps(TorchDispatchMode):
    """Raise on any operator of :data:`SYNCING`, or an index / index_put with a boolean mask
    (``count=True``: count them in :attr:`seen` instead)."""

    def __init__(self, count: bool = False) -> None:
        super().__init__()
        self.count, self.seen = count, 0

    def _syncs(self, what: str) -> None:
        if not self.count:
            raise AssertionError(f"{what} would synchronise with a GPU")
        self.seen += 1

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.overloadpacket in SYNCING:
            self._syncs(str(func))
        elif func.overloadpacket in (aten.index, aten.index_put, aten.index_put_, aten._index_put_impl_):
            indices = args[1] if len(args) > 1 else kwargs.get("indices", ())
            if any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in indices):
                self._syncs(f"{func} with a boolean mask")
        return func(*args, **kwargs)


def no_sync(device: str):
    return FailOnSyncingOps() if device == "cpu" else _cuda_sync_errors()


@contextlib.contextmanager
def _cuda_sync_errors():
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode(0)


class DeviceToyBackend:
    """Open-loop physics without host synchronisation: envs sink at a per-env rate; resets by mask."""

    def __init__(self, n: int, sim_dt: float, decimation: int, device: str) -> None:
        dev = self.device = torch.device("cuda", torch.cuda.current_device()) if device == "cuda" else torch.device(device)
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

    def reset_envs_masked(self, mask: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        self.k.masked_fill_(mask, 0)
        self.qpos.copy_(torch.where(mask[:, None], qpos, self.qpos))
        self.qvel.copy_(torch.where(mask[:, None], qvel, self.qvel))
        self.torque.masked_fill_(mask[:, None], 0)

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


def toy_env(n: int, device: str, **overrides) -> G1WalkEnv:
    cfg = gait_clock_config(num_envs=n, device=device, episode_length_s=1.0, **overrides)
    nominal = torch.zeros(7 + J)
    nominal[2], nominal[3] = 0.78, 1.0
    names = tuple(f"left_hip_{i}_joint" if i < 12 else f"waist_{i}_joint" for i in range(J))
    backend = DeviceToyBackend(n, cfg.sim_dt, cfg.decimation, device)
    env = G1WalkEnv(cfg, backend=backend, nominal_qpos=nominal, joint_names=names)
    env.validate_actions = False
    return env


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("resampling", [None, (0.1, 0.3)])
def test_a_step_and_its_resets_do_not_synchronise(resampling, device) -> None:
    n = 256
    env = toy_env(n, device, resampling_time_range=resampling)
    backend = env.backend
    env.reset()
    actions = 0.3 * torch.randn(n, J, device=backend.device)
    ends = torch.zeros((), dtype=torch.long, device=backend.device)
    for _ in range(60):
        with no_sync(device):
            result = env.step(actions)
            ends += (result.terminated | result.truncated).sum()
    assert int(ends) > n  # falls (sinking envs) and timeouts (50 steps) both happened


@pytest.mark.parametrize("device", DEVICES)
def test_a_changed_config_reaches_the_device_without_a_sync(device) -> None:
    """The reward table and the command ranges are uploaded when the config changes, which can be
    the first step of a run: through pinned memory on CUDA, so the step still does not wait."""
    from isaac_adapter.tasks.g1_walk.task import upload_without_sync

    table = [[0.5, -0.25], [1.0, 3.0]]
    with no_sync(device):
        got = upload_without_sync(table, device)
    assert got.dtype == torch.float32 and got.device.type == device
    assert got.cpu().tolist() == table  # exact in float32


def test_the_check_catches_a_syncing_step() -> None:
    """The CPU stand-in fails where a GPU would synchronise: the test above could fail."""
    x = torch.tensor([0.0, 1.0, 2.0])
    for syncing in (lambda: torch.nonzero(x > 0), lambda: x[x > 0], lambda: bool(x.sum() > 0), lambda: x.max().item()):
        with pytest.raises(AssertionError, match="synchronise"), FailOnSyncingOps():
            syncing()


def test_a_rollout_synchronises_a_fixed_number_of_times_whatever_its_length() -> None:
    """The Runner's collection (policy, env step, storage, episode bookkeeping) adds no host
    synchronisation per step with --no-validate: a rollout of 12 steps costs what one of 4 does."""
    from ppo_bootstrap import PolicyConfig, PPOConfig, Runner, RunnerConfig

    def syncs(steps: int) -> int:
        env = toy_env(64, "cpu")
        cfg = RunnerConfig(num_steps_per_env=steps, console=False, validate_env_output=False, seed=0,
                           ppo=PPOConfig(num_mini_batches=1), policy=PolicyConfig(actor_hidden=(8,), critic_hidden=(8,)))
        runner = Runner(env, cfg)
        with FailOnSyncingOps(count=True) as mode:
            runner._collect()
        return mode.seen

    assert syncs(4) == syncs(12)
