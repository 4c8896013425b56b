"""MuJoCo on CPU: every env is one row of a :class:`mujoco.batch.Batch`, stepped on all cores.

``mujoco.batch`` (MuJoCo 4) keeps each simulation's integration state as one row of a
``[N, nstate]`` array and steps the rows on a thread pool; results are bit-identical to a serial
loop at any thread count, so runs are reproducible regardless of the core count.

Two details of the batch shape this file:

* Derived fields (body positions, sensors) lag the state by one substep after ``step``, as with
  ``mj_step``. We step with ``stage=mjSTAGE_VEL`` so positions, velocities and position/velocity
  sensors (foot contacts, foot velocities) describe the state the policy will act on.
* A non-persistent batch shares one ``MjData`` per thread, so a field a call did not compute holds
  another simulation's value. Actuator torques are only computed by a step, so we copy them into
  our own buffer after each step and zero the rows we reset.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import mujoco
import numpy as np
import torch

from isaac_adapter.backends.base import PhysicsState
from isaac_adapter.backends.layout import ModelParams, RobotArrays, init_backend

try:
    import mujoco.batch
except ImportError as error:  # mujoco.batch arrived with MuJoCo 4
    raise ImportError(f"the CPU backend needs mujoco>=4.0 (mujoco.batch); found {mujoco.__version__}") from error


def _view(array: np.ndarray) -> torch.Tensor:
    """Zero-copy torch view of a batch array (same shape, float64).

    The batch flags its derived outputs read-only; torch warns about that once per view, but we
    only ever read those views.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.from_numpy(array)


class MujocoCpuBackend:
    """``num_envs`` copies of ``model`` on ``nthread`` CPU threads (0: all cores).

    Args:
        model: compiled model; every actuator drives one hinge/slide joint, the root has a free joint.
        num_envs: number of simulations.
        decimation: physics substeps per ``step`` call.
        root_body: name of the floating-base body.
        foot_bodies: names of the foot bodies, ``F`` of them.
        foot_contact_sensors: one contact sensor per foot (any positive reading means contact).
        foot_vel_sensors: one ``framelinvel`` sensor per foot body.
        nthread: worker threads, 0 for all cores.
    """

    def __init__(
        self, model: mujoco.MjModel, num_envs: int, decimation: int, *, root_body: str, foot_bodies: Sequence[str],
        foot_contact_sensors: Sequence[str], foot_vel_sensors: Sequence[str], nthread: int = 0,
    ) -> None:
        layout = init_backend(self, model, num_envs, decimation, torch.device("cpu"),
                              root_body=root_body, foot_bodies=foot_bodies,
                              foot_contact_sensors=foot_contact_sensors, foot_vel_sensors=foot_vel_sensors)
        self._batch = mujoco.batch.Batch(model, num_envs, nthread)
        self.nthread = self._batch.nthread
        # live views: state rows (writable) and derived outputs (refreshed after every call)
        bind = self._batch.bind
        self._ctrl = bind("ctrl")
        self._actuator_force = bind("actuator_force")
        self._torque = np.zeros((num_envs, self.num_joints))
        self._robot = RobotArrays(
            layout,
            qpos=_view(bind("qpos")),
            qvel=_view(bind("qvel")),
            ctrl=_view(self._ctrl),
            sensordata=_view(bind("sensordata")),
            xpos=_view(bind("xpos")),
            subtree_com=_view(bind("subtree_com")),
            torque=_view(self._torque),
        )
        self._batch.reset(stage=mujoco.mjtStage.mjSTAGE_VEL)
        self._params = ModelParams(model, layout)
        self.num_links = self._params.num_links

    # -- state ---------------------------------------------------------------------------------

    def state(self) -> PhysicsState:
        """Copies of the current state as float32 tensors (see :class:`PhysicsState` for shapes)."""
        return self._robot.state()

    # -- stepping ------------------------------------------------------------------------------

    def step(self, joint_pos_targets: torch.Tensor) -> None:
        """Hold position targets ``[N, J]`` for ``decimation`` substeps on all threads."""
        self._ctrl[:] = joint_pos_targets.detach().to("cpu", torch.float64).numpy()
        self._batch.step(nstep=self.decimation, stage=mujoco.mjtStage.mjSTAGE_VEL)
        self._torque[:] = self._actuator_force

    def reset_envs(self, env_ids: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """Reset rows ``env_ids`` to ``qpos`` ``[K, 7+J]`` / ``qvel`` ``[K, 6+J]`` (world-frame root velocities)."""
        ids = env_ids.detach().cpu().numpy().astype(np.int64)
        if ids.size == 0:
            return
        # clears time, controls, activations and solver warm start of those rows only
        self._batch.reset(ids, stage=mujoco.mjtStage.mjSTAGE_NONE)
        self._robot.write_reset_rows(torch.from_numpy(ids), qpos, qvel)
        self._batch.forward(ids, stage=mujoco.mjtStage.mjSTAGE_VEL)

    def add_root_velocity(self, mask: torch.Tensor, delta: torch.Tensor) -> None:
        """A push: add ``delta`` ``[N, 3]`` (m/s, world frame) to the root linear velocity of the envs
        where ``mask`` ``[N]``; their derived fields are recomputed, every other env is untouched."""
        self._robot.add_root_velocity_masked(mask.cpu(), delta.cpu())
        ids = np.flatnonzero(mask.detach().cpu().numpy())
        if ids.size:
            self._batch.forward(ids, stage=mujoco.mjtStage.mjSTAGE_VEL)

    def set_physics_params(self, mask: torch.Tensor, params: dict[str, torch.Tensor]) -> None:
        """Give the envs where ``mask`` ``[N]`` the model parameters ``params`` (``{name: [N, ...]}``,
        see :class:`~isaac_adapter.backends.layout.ModelParams`), as per-simulation fields of the
        batch; the other envs keep theirs. Takes effect from their next forward pass (a reset's)."""
        ids = np.flatnonzero(mask.detach().cpu().numpy())
        if ids.size == 0 or not params:
            return
        for name, values in self._params.values({k: v.cpu() for k, v in params.items()}).items():
            self._batch.expand(name)[ids] = values.numpy()[ids]

    def physics_params(self, name: str) -> np.ndarray:
        """The ``[N, ...]`` per-env values of model field ``name`` (the shared ones repeated)."""
        values = self._batch.expanded(name)
        return np.broadcast_to(getattr(self.model, name), (self.num_envs, *getattr(self.model, name).shape)) \
            if values is None else values.copy()

    # -- checkpointing -------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        return {"state": self._batch.state.copy(), "torque": self._torque.copy()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._batch.state[:] = state["state"]
        self._torque[:] = state["torque"]
        # derived fields are a pure function of the state rows: recompute them
        self._batch.forward(stage=mujoco.mjtStage.mjSTAGE_VEL)
