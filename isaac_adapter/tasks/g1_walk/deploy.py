"""What a deployment of a G1 walk policy needs beside the exported actor: ``deploy.yaml``.

The exported ``policy.onnx`` maps an observation to actions (normalizer inside,
:mod:`ppo_bootstrap.export`); everything around it is the task's: which joints in which order, the
pose the actions are offsets from, the observation's terms and scales, the rates, the gait clock,
the PD gains and torque limits of the joints. :func:`deploy_config` derives each of these from the
task config and the MuJoCo model the task trains on (:func:`.assets.build_g1_model`), so the file
cannot drift from the task; ``deploy/deploy_mujoco.py`` runs a policy from it with MuJoCo, numpy
and onnxruntime alone. Field names follow unitree_rl_gym's ``deploy_mujoco`` configs where one
exists (``simulation_dt``, ``control_decimation``, ``kps``, ``kds``, ``default_angles``,
``action_scale``, ``num_actions``, ``num_obs``). See ``docs/deploy.md``.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from ppo_bootstrap.export import ONNX_NAME, export_policy

from isaac_adapter.tasks.g1_walk import assets, terms
from isaac_adapter.tasks.g1_walk.config import G1WalkConfig

DEPLOY_NAME = "deploy.yaml"
FORMAT_VERSION = 1


def policy_obs_terms(cfg: G1WalkConfig, num_joints: int) -> list[dict[str, Any]]:
    """The policy observation as ordered ``{name, width, scale}`` terms: the observation is their
    concatenation, each term times its scale (:func:`.terms.policy_obs`, then the clock when on)."""
    clock = cfg.gait_period_s is not None
    names = terms.POLICY_OBS_TERMS + ((terms.CLOCK_TERM,) if clock else ())
    # the widths in the observation's order, as the task counts them (the clock's (sin, cos) unscaled)
    widths = terms.policy_term_widths(num_joints, clock).values()
    scales = {**terms.policy_obs_scales(cfg.obs_ang_vel_scale, cfg.obs_joint_vel_scale), terms.CLOCK_TERM: 1.0}
    return [{"name": name, "width": width, "scale": scales[name]} for name, width in zip(names, widths, strict=True)]


def _servo_gains(model: mujoco.MjModel) -> tuple[np.ndarray, np.ndarray]:
    """``(kp, kd)`` ``[J]`` of the model's position servos, ``force = kp (ctrl - q) - kd qdot``. A
    joint's own ``damping`` is not in ``kd``: it stays in the model, as the plant's (the
    ``playground_feetonly`` G1 damps its joints so, with servos of ``kv`` 0).

    Raises:
        ValueError: an actuator is no such servo (another actuator law has no PD gains to export).
    """
    gain, bias = model.actuator_gainprm, model.actuator_biasprm
    kp, kd = gain[:, 0].copy(), -bias[:, 2] + 0.0  # + 0.0: no -0.0 in the YAML
    servo = ((model.actuator_gaintype == mujoco.mjtGain.mjGAIN_FIXED)
             & (model.actuator_biastype == mujoco.mjtBias.mjBIAS_AFFINE)
             & np.isclose(bias[:, 1], -kp) & (bias[:, 0] == 0) & (kp > 0) & (kd >= 0))
    if not servo.all():
        names = [model.actuator(int(i)).name for i in np.flatnonzero(~servo)]
        raise ValueError(f"actuators {names} are not position servos (kp (ctrl - q) - kd qdot); no PD gains to export")
    return kp, kd


def _torque_limits(model: mujoco.MjModel) -> list[float | None]:
    """Per actuated joint, the largest torque the model lets its actuator apply (N m, symmetric):
    the joint's ``actuatorfrcrange`` and the actuator's ``forcerange``, the tighter; None if neither."""
    limits: list[float | None] = []
    for i, joint in enumerate(model.actuator_trnid[:, 0]):
        bounds = []
        if model.jnt_actfrclimited[joint]:
            bounds.append(model.jnt_actfrcrange[joint])
        if model.actuator_forcelimited[i]:
            bounds.append(model.actuator_forcerange[i])
        if any(not math.isclose(-lo, hi) for lo, hi in bounds):
            raise ValueError(f"actuator {model.actuator(i).name}: an asymmetric force range {bounds} has no torque limit")
        limits.append(min(float(hi) for _, hi in bounds) if bounds else None)
    return limits


def _target_limits(model: mujoco.MjModel) -> list[list[float] | None]:
    """Per actuated joint, the range a position target is clamped to (the servo's ``ctrlrange``), or None."""
    return [[float(lo), float(hi)] if model.actuator_ctrllimited[i] else None
            for i, (lo, hi) in enumerate(model.actuator_ctrlrange)]


def deploy_config(cfg: G1WalkConfig, policy_file: str = ONNX_NAME, task_id: str | None = None) -> dict[str, Any]:
    """Everything ``deploy/deploy_mujoco.py`` (or a robot's controller) needs to run the policy of
    task ``cfg``, as plain data: see ``docs/deploy.md`` for each field.

    Args:
        cfg: the task the policy was trained on (e.g. ``registry.checkpoint_walk_config``).
        policy_file: the ONNX file, relative to the folder the config is written to.
        task_id: the registered task, recorded for the reader (None: not recorded).
    """
    g1 = assets.build_task_model(cfg)
    model, joints = g1.model, len(g1.joint_names)
    kp, kd = _servo_gains(model)
    obs_terms = policy_obs_terms(cfg, joints)
    floats = lambda xs: [float(x) for x in xs]  # noqa: E731  (plain numbers for YAML)
    return {
        "format_version": FORMAT_VERSION,
        "task": task_id,
        "policy_path": policy_file,
        # the model file the task compiles; the task drops the file's sensors and adds foot
        # sensors and a floor where the file has none, none of which moves the dynamics
        "xml_path": str(assets.asset_root() / assets.VARIANTS[cfg.model_variant].scene),
        "model_variant": cfg.model_variant,
        "simulation_dt": cfg.sim_dt,
        "control_decimation": cfg.decimation,
        "integrator": assets.option_name(mujoco.mjtIntegrator, model.opt.integrator),
        "solver": assets.option_name(mujoco.mjtSolver, model.opt.solver),
        "solver_iterations": int(model.opt.iterations),
        "ls_iterations": int(model.opt.ls_iterations),
        "num_actions": joints,
        # the policy's input: obs_frames frames of obs_terms, the current one first, then those acted on before
        "num_obs": cfg.policy_obs_frames * sum(term["width"] for term in obs_terms),
        "obs_frames": cfg.policy_obs_frames,
        "joint_names": list(g1.joint_names),
        "default_angles": floats(g1.nominal_qpos[7:]),
        "init_root_pos": floats(g1.nominal_qpos[:3]),
        "init_root_quat": floats(g1.nominal_qpos[3:7]),  # (w, x, y, z)
        "action_scale": cfg.action_scale,
        "action_clip": cfg.action_clip,
        "kps": floats(kp),
        "kds": floats(kd),
        "torque_limits": _torque_limits(model),
        "target_limits": _target_limits(model),
        "obs_terms": obs_terms,
        "gait_period_s": cfg.gait_period_s,
        "fall_height": cfg.train_collapse_height,
        "command_ranges": {"lin_vel_x": floats(cfg.lin_vel_x_range), "lin_vel_y": floats(cfg.lin_vel_y_range),
                           "ang_vel_z": floats(cfg.ang_vel_z_range)},
    }


def write_deploy_config(config: dict[str, Any], directory: str | os.PathLike) -> Path:
    """Write ``config`` (:func:`deploy_config`) as ``deploy.yaml`` into ``directory``, beside the
    exported policy; returns its path. The file replaces an older one only once it is whole."""
    import yaml

    path = Path(directory) / DEPLOY_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    header = ("# The exported G1 walk policy's deployment: python deploy/deploy_mujoco.py --config " + DEPLOY_NAME + "\n"
              "# Every value is derived from the task config and its MuJoCo model (docs/deploy.md).\n")
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(header + yaml.safe_dump(config, sort_keys=False, default_flow_style=None, width=120))
    tmp.replace(path)
    return path


def export_deployment(policy: Any, obs_dim: int, cfg: G1WalkConfig, directory: str | os.PathLike,
                      task_id: str | None = None) -> dict[str, Path]:
    """The exported actor (``policy.onnx``, ``policy.pt``, ``policy.json``: :func:`ppo_bootstrap.export.export_policy`)
    and its ``deploy.yaml`` in ``directory``; returns their paths, the config's under ``"deploy"``.

    Args:
        policy: the trained :class:`ppo_bootstrap.ActorCritic` of task ``cfg``.
        obs_dim: the width of its policy observation.

    Raises:
        ValueError: ``obs_dim`` is not the width of ``cfg``'s observation (a policy of another task).
    """
    config = deploy_config(cfg, ONNX_NAME, task_id)
    if obs_dim != config["num_obs"]:
        raise ValueError(f"the policy takes {obs_dim} observations, the task's layout has {config['num_obs']} "
                         f"({', '.join(term['name'] for term in config['obs_terms'])})")
    paths = export_policy(policy, obs_dim, directory)
    paths["deploy"] = write_deploy_config(config, directory)
    return paths
