#!/usr/bin/env python
"""Run an exported G1 walk policy in MuJoCo from its ``deploy.yaml``, as a G1 owner checks a policy
before the robot: MuJoCo, numpy, PyYAML and onnxruntime, nothing of the training code.

    python deploy/deploy_mujoco.py --config exported/deploy.yaml                   # viewer, keyboard commands
    python deploy/deploy_mujoco.py --config exported/deploy.yaml --headless --commands cmds.txt --duration 20
    python deploy/deploy_mujoco.py --config exported/deploy.yaml --headless --pd torque --sim-dt 0.002

Every policy step (``simulation_dt * control_decimation``) the script builds the observation from
the MuJoCo state itself, term by term as ``obs_terms`` lists them (with ``obs_frames`` > 1 followed
by the frames the policy acted on before, newest first, the episode's first repeated until there
are enough), runs ``policy.onnx`` and turns its
actions into joint targets ``default_angles + action_scale * clip(action)``; every physics step a PD
law ``kp (target - q) - kd qdot``, clipped to the torque limits, drives the joints:

* ``--pd servo`` (default): the model's own position servos take the targets (MuJoCo integrates
  their damping implicitly, as in training), and the script checks each physics step that the PD
  torque it computes from ``kps`` / ``kds`` / ``torque_limits`` is the torque they applied;
* ``--pd torque``: the script's PD torques drive the joints (the servos become torque motors), as
  a robot's joint controller does. An explicit damping term needs a short physics step: at the
  training's 5 ms the light joints (wrists) oscillate and the robot falls; 2 ms holds.

Commands: ``--commands FILE``, rows ``t vx vy yaw_rate`` (s, m/s, m/s, rad/s; spaces or commas,
``#`` comments), each held from its time until the next row's; or ``--command vx,vy,yaw_rate`` held
throughout; or in the viewer the keyboard: Up/Down v_x, PageUp/PageDown v_y, Left/Right yaw rate
(0.1 per press), Home stops.

Prints a status line per simulated second and a summary: falls (base height below ``fall_height``;
the robot then respawns), tracking error (mean ``|v_xy - cmd_xy|`` in the body frame, and
``|w_z - cmd_wz|``). Exit status 0 without a fall, 1 after one, 2 on bad input (one line).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import mujoco
import numpy as np
import onnxruntime
import yaml

REQUIRED = ("policy_path", "xml_path", "simulation_dt", "control_decimation", "num_actions", "num_obs", "joint_names",
            "default_angles", "init_root_pos", "init_root_quat", "action_scale", "action_clip", "kps", "kds",
            "torque_limits", "target_limits", "obs_terms", "gait_period_s", "fall_height")
COMMAND_STEP = 0.1  # keyboard: change per key press (m/s, rad/s)
# GLFW key codes the viewer passes to its key callback
KEY_UP, KEY_DOWN, KEY_LEFT, KEY_RIGHT, KEY_PAGE_UP, KEY_PAGE_DOWN, KEY_HOME = 265, 264, 263, 262, 266, 267, 268


class UsageError(Exception):
    """Bad input: printed as one line, exit status 2."""


# -- inputs -------------------------------------------------------------------------------------


def load_config(path: Path) -> dict:
    if not path.is_file():
        raise UsageError(f"--config {path}: no such file (export writes it beside policy.onnx)")
    try:
        config = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise UsageError(f"--config {path}: not YAML ({str(err).splitlines()[0]})") from None
    missing = [key for key in REQUIRED if not isinstance(config, dict) or key not in config]
    if missing:
        raise UsageError(f"--config {path}: missing {', '.join(missing)}; export the policy again to write them")
    joints = config["num_actions"]
    for key in ("joint_names", "default_angles", "kps", "kds", "torque_limits", "target_limits"):
        if len(config[key]) != joints:
            raise UsageError(f"--config {path}: {key} has {len(config[key])} entries for {joints} joints")
    if not all(isinstance(term, dict) and {"name", "width", "scale"} <= set(term) for term in config["obs_terms"]):
        raise UsageError(f"--config {path}: every obs_terms entry is {{name, width, scale}}")
    frames = config.setdefault("obs_frames", 1)  # configs written before the history: one frame
    if not isinstance(frames, int) or isinstance(frames, bool) or frames < 1:
        raise UsageError(f"--config {path}: obs_frames must be an integer >= 1, got {frames!r}")
    if frames * sum(term["width"] for term in config["obs_terms"]) != config["num_obs"]:
        raise UsageError(f"--config {path}: obs_frames {frames} times the widths of obs_terms is not num_obs "
                         f"{config['num_obs']}")
    return config


def read_commands(path: Path) -> np.ndarray:
    """``[K, 4]`` rows ``(t, vx, vy, yaw_rate)`` of a command file, times from 0 and increasing."""
    if not path.is_file():
        raise UsageError(f"--commands {path}: no such file")
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].replace(",", " ").split()
        if not line:
            continue
        try:
            row = [float(x) for x in line]
        except ValueError:
            row = []
        if len(row) != 4 or not all(map(math.isfinite, row)):
            raise UsageError(f"--commands {path}:{number}: expected 't vx vy yaw_rate' (4 numbers), got {' '.join(line)!r}")
        rows.append(row)
    if not rows:
        raise UsageError(f"--commands {path}: no rows; write one 't vx vy yaw_rate' per line")
    table = np.array(rows)
    if table[0, 0] != 0.0 or (np.diff(table[:, 0]) <= 0).any():
        raise UsageError(f"--commands {path}: times must start at 0 and increase (got {table[:, 0].tolist()})")
    return table


def parse_command(text: str) -> np.ndarray:
    try:
        command = np.array([float(x) for x in text.split(",")])
    except ValueError:
        command = np.zeros(0)
    if command.shape != (3,):
        raise UsageError(f"--command {text!r}: expected vx,vy,yaw_rate (three numbers)")
    return command


# -- the robot in MuJoCo ------------------------------------------------------------------------


def gravity_in_body(quat: np.ndarray) -> np.ndarray:
    """The unit gravity vector ``(0, 0, -1)`` in the frame of ``quat`` ``(w, x, y, z)``: ``R^T g``."""
    w, x, y, z = quat / np.linalg.norm(quat)
    # the last row of R(quat), negated: R^T (0, 0, -1) = -(R_20, R_21, R_22)
    return -np.array([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)])


def to_body(quat: np.ndarray, vec_w: np.ndarray) -> np.ndarray:
    """World vector ``vec_w`` in the frame of ``quat``."""
    rotated = np.zeros(3)
    mujoco.mju_rotVecQuat(rotated, vec_w, quat * np.array([1.0, -1.0, -1.0, -1.0]) / np.linalg.norm(quat))
    return rotated


class Robot:
    """The model's floating base and the config's joints, by name, and the PD law of the config."""

    def __init__(self, model: mujoco.MjModel, config: dict, pd: str) -> None:
        free = [j for j in range(model.njnt) if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE]
        if len(free) != 1:
            raise UsageError(f"the model has {len(free)} free joints; a floating-base robot has one")
        self.root_q, self.root_v = int(model.jnt_qposadr[free[0]]), int(model.jnt_dofadr[free[0]])
        names = config["joint_names"]
        joint_ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name) for name in names]
        absent = [name for name, j in zip(names, joint_ids) if j < 0]
        if absent:
            raise UsageError(f"joints {absent} of the config are not in the model; is --xml the robot it was trained on?")
        driven = {int(j): a for a, j in enumerate(model.actuator_trnid[:, 0])
                  if model.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT}
        undriven = [name for name, j in zip(names, joint_ids) if j not in driven]
        if undriven:
            raise UsageError(f"joints {undriven} have no actuator in the model")
        self.q = model.jnt_qposadr[joint_ids]
        self.v = model.jnt_dofadr[joint_ids]
        self.act = np.array([driven[j] for j in joint_ids])
        self.default = np.array(config["default_angles"], dtype=np.float64)
        self.kp, self.kd = np.array(config["kps"], dtype=np.float64), np.array(config["kds"], dtype=np.float64)
        self.torque_limit = np.array([math.inf if t is None else t for t in config["torque_limits"]], dtype=np.float64)
        limits = [(-math.inf, math.inf) if r is None else r for r in config["target_limits"]]
        self.target_low, self.target_high = np.array(limits, dtype=np.float64).T
        if pd == "torque":  # the servos become torque motors: ctrl is the torque the script computes
            model.actuator_gaintype[self.act] = mujoco.mjtGain.mjGAIN_FIXED
            model.actuator_gainprm[self.act] = 0.0
            model.actuator_gainprm[self.act, 0] = 1.0
            model.actuator_biastype[self.act] = mujoco.mjtBias.mjBIAS_NONE
            model.actuator_biasprm[self.act] = 0.0
            model.actuator_ctrllimited[self.act] = 0

    def pd_torque(self, data: mujoco.MjData, target: np.ndarray) -> np.ndarray:
        """``[J]`` N m: ``kp (target - q) - kd qdot`` with the target in its limits, clipped to the torque limits."""
        target = np.clip(target, self.target_low, self.target_high)
        torque = self.kp * (target - data.qpos[self.q]) - self.kd * data.qvel[self.v]
        return np.clip(torque, -self.torque_limit, self.torque_limit)


class Deployment:
    """The policy in the loop: observation, ONNX, targets, PD, physics; one robot, one episode at a time."""

    def __init__(self, config: dict, model: mujoco.MjModel, session: onnxruntime.InferenceSession, pd: str) -> None:
        self.config, self.model, self.session, self.pd = config, model, session, pd
        self.data = mujoco.MjData(model)
        self.robot = Robot(model, config, pd)
        self.policy_dt = config["simulation_dt"] * config["control_decimation"]
        self.decimation = round(self.policy_dt / model.opt.timestep)
        self.input_name = session.get_inputs()[0].name
        self.pd_error = 0.0  # servo mode: largest |script PD torque - servo torque| seen (N m)
        self.reset()

    def reset(self) -> None:
        """Spawn at the nominal pose, at rest; the episode's step count, clock and last action restart."""
        d, r = self.data, self.robot
        mujoco.mj_resetData(self.model, d)
        d.qpos[r.root_q:r.root_q + 3] = self.config["init_root_pos"]
        d.qpos[r.root_q + 3:r.root_q + 7] = self.config["init_root_quat"]
        d.qpos[r.q] = r.default
        self.target = r.default.copy()
        d.ctrl[r.act] = self.target if self.pd == "servo" else 0.0
        mujoco.mj_forward(self.model, d)
        self.episode_step = 0
        self.last_action = np.zeros(self.config["num_actions"])
        self.history: list[np.ndarray] = []  # the frames acted on this episode, newest first

    def term(self, name: str, command: np.ndarray) -> np.ndarray:
        """The unscaled value of the obs term ``name`` (the names the export writes) now."""
        d, r = self.data, self.robot
        if name == "base_ang_vel":  # a free joint's angular velocity is in the body frame: the gyro's reading
            return d.qvel[r.root_v + 3:r.root_v + 6]
        if name == "projected_gravity":
            return gravity_in_body(d.qpos[r.root_q + 3:r.root_q + 7])
        if name == "velocity_command":
            return command
        if name == "joint_pos_rel":
            return d.qpos[r.q] - r.default
        if name == "joint_vel":
            return d.qvel[r.v]
        if name == "last_action":
            return self.last_action
        if name == "gait_clock":  # one cycle per gait_period_s from the episode's start
            phase = (self.episode_step * self.policy_dt / self.config["gait_period_s"]) % 1.0
            return np.array([math.sin(2 * math.pi * phase), math.cos(2 * math.pi * phase)])
        raise UsageError(f"obs term {name!r} of the config is not one this script computes")

    def frame(self, command: np.ndarray) -> np.ndarray:
        """One frame, float32: the config's terms in order, each times its scale."""
        parts = []
        for spec in self.config["obs_terms"]:
            value = np.asarray(self.term(spec["name"], command), dtype=np.float64) * spec["scale"]
            if value.shape != (spec["width"],):
                raise UsageError(f"obs term {spec['name']!r}: the config says width {spec['width']}, it has {value.size}")
            parts.append(value)
        return np.concatenate(parts).astype(np.float32)

    def observation(self, command: np.ndarray) -> np.ndarray:
        """``[num_obs]`` float32: this frame, then the ``obs_frames - 1`` frames acted on before it,
        newest first; an episode's first frame stands in for those it has not had yet."""
        frame = self.frame(command)
        past = self.history or [frame]
        past = past + [past[-1]] * (self.config["obs_frames"] - 1 - len(past))
        return np.concatenate([frame, *past[: self.config["obs_frames"] - 1]])

    def step(self, command: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One policy step under ``command``; returns ``(obs, action)`` (the action as the policy gave it)."""
        obs = self.observation(command)
        if self.config["obs_frames"] > 1:
            frame = obs[: obs.size // self.config["obs_frames"]]
            self.history = [frame, *self.history][: self.config["obs_frames"] - 1]
        action = self.session.run(None, {self.input_name: obs[None]})[0][0].astype(np.float64)
        clipped = np.clip(action, -self.config["action_clip"], self.config["action_clip"])
        self.target = self.robot.default + self.config["action_scale"] * clipped
        for _ in range(self.decimation):
            torque = self.robot.pd_torque(self.data, self.target)
            if self.pd == "servo":
                self.data.ctrl[self.robot.act] = self.target
            else:
                self.data.ctrl[self.robot.act] = torque
            mujoco.mj_step(self.model, self.data)
            # the torque this physics step applied at the joints, from the state it started in
            self.pd_error = max(self.pd_error, float(np.abs(self.data.qfrc_actuator[self.robot.v] - torque).max()))
        self.last_action = clipped
        self.episode_step += 1
        return obs, action

    def base_velocity(self) -> tuple[np.ndarray, float]:
        """``(v_xy, w_z)`` of the base in its own frame."""
        r, d = self.robot, self.data
        quat = d.qpos[r.root_q + 3:r.root_q + 7]
        lin_b = to_body(quat, d.qvel[r.root_v:r.root_v + 3])  # a free joint's linear velocity is in the world frame
        return lin_b[:2], float(d.qvel[r.root_v + 5])


# -- the run ------------------------------------------------------------------------------------


class Keyboard:
    """The command, changed by the viewer's key presses."""

    def __init__(self, command: np.ndarray) -> None:
        self.command = command.astype(np.float64).copy()

    def __call__(self, key: int) -> None:
        moves = {KEY_UP: (0, 1), KEY_DOWN: (0, -1), KEY_PAGE_UP: (1, 1), KEY_PAGE_DOWN: (1, -1),
                 KEY_LEFT: (2, 1), KEY_RIGHT: (2, -1)}
        if key == KEY_HOME:
            self.command[:] = 0.0
        elif key in moves:
            axis, sign = moves[key]
            self.command[axis] = round(self.command[axis] + sign * COMMAND_STEP, 6)
        else:
            return
        print(f"command vx {self.command[0]:+.2f} vy {self.command[1]:+.2f} yaw_rate {self.command[2]:+.2f}", flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, type=Path, help="deploy.yaml written by the export")
    parser.add_argument("--policy", type=Path, default=None, help="the ONNX file (default: the config's policy_path)")
    parser.add_argument("--xml", type=Path, default=None, help="the robot's MJCF (default: the config's xml_path)")
    parser.add_argument("--commands", type=Path, default=None, help="file of timed rows 't vx vy yaw_rate'")
    parser.add_argument("--command", default="0.5,0,0", help="vx,vy,yaw_rate held without --commands (default 0.5,0,0)")
    parser.add_argument("--duration", type=float, default=None,
                        help="simulated seconds (default 20; in the viewer: until the window closes)")
    parser.add_argument("--headless", action="store_true", help="no viewer: run as fast as the CPU allows")
    parser.add_argument("--pd", choices=("servo", "torque"), default="servo",
                        help="servo: the model's position servos take the targets; torque: the script's PD torques")
    parser.add_argument("--sim-dt", type=float, default=None,
                        help="physics step (s; default the config's simulation_dt); the policy rate stays the config's")
    parser.add_argument("--record", type=Path, default=None,
                        help="write every policy step's state, observation and action to this .npz")
    args = parser.parse_args(argv)
    if args.duration is not None and not args.duration > 0:
        parser.error(f"--duration must be positive, got {args.duration}")
    if args.sim_dt is not None and not args.sim_dt > 0:
        parser.error(f"--sim-dt must be positive, got {args.sim_dt}")
    return args


def load(args: argparse.Namespace) -> tuple[dict, mujoco.MjModel, onnxruntime.InferenceSession]:
    config = load_config(args.config)
    policy_path = args.policy or (args.config.parent / config["policy_path"])
    if not policy_path.is_file():
        raise UsageError(f"policy {policy_path}: no such file (--policy, or policy_path in {args.config})")
    xml = args.xml or Path(config["xml_path"])
    if not xml.is_file():
        raise UsageError(f"model {xml}: no such file; pass the robot's MJCF with --xml")
    try:
        model = mujoco.MjModel.from_xml_path(str(xml))
    except ValueError as err:
        raise UsageError(f"model {xml}: {str(err).splitlines()[0]}") from None
    policy_dt = config["simulation_dt"] * config["control_decimation"]
    sim_dt = args.sim_dt or config["simulation_dt"]
    substeps = policy_dt / sim_dt
    if abs(substeps - round(substeps)) > 1e-9 * substeps:
        raise UsageError(f"--sim-dt {sim_dt}: the policy step {policy_dt:g} s must be a whole number of physics steps")
    # the physics the policy was trained on: the config's step, integrator, solver and its budget
    model.opt.timestep = sim_dt
    for key, enum, prefix in (("integrator", mujoco.mjtIntegrator, "mjINT_"), ("solver", mujoco.mjtSolver, "mjSOL_")):
        if config.get(key):
            value = getattr(enum, prefix + str(config[key]).upper(), None)
            if value is None:
                raise UsageError(f"--config {args.config}: {key} {config[key]!r} is none of MuJoCo's")
            setattr(model.opt, key, value)
    for key in ("solver_iterations", "ls_iterations"):
        if config.get(key) is not None:
            setattr(model.opt, key.removeprefix("solver_"), int(config[key]))
    session = onnxruntime.InferenceSession(str(policy_path), providers=["CPUExecutionProvider"])
    inputs = session.get_inputs()
    if len(inputs) != 1:
        raise UsageError(f"policy {policy_path} takes {[i.name for i in inputs]}; this script runs feed-forward policies "
                         "(one input, the observation)")
    if inputs[0].shape[-1] != config["num_obs"]:
        raise UsageError(f"policy {policy_path} takes {inputs[0].shape[-1]} observations, the config builds "
                         f"{config['num_obs']}; is it the config exported with this policy?")
    return config, model, session


def run(args: argparse.Namespace) -> int:
    if not args.headless and sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        raise UsageError("no display for the viewer (DISPLAY is not set); run with --headless")
    config, model, session = load(args)
    schedule = read_commands(args.commands) if args.commands else None
    keyboard = Keyboard(parse_command(args.command))
    deployment = Deployment(config, model, session, args.pd)
    duration = args.duration if args.duration is not None else (None if not args.headless else 20.0)
    policy_dt = deployment.policy_dt
    print(f"policy {session.get_inputs()[0].shape[-1]} obs -> {config['num_actions']} actions every {policy_dt * 1e3:g} ms, "
          f"physics {model.opt.timestep * 1e3:g} ms x {deployment.decimation}, PD {args.pd}, "
          f"{'the gait clock ' + format(config['gait_period_s'], 'g') + ' s' if config['gait_period_s'] else 'no gait clock'}",
          flush=True)
    ranges = config.get("command_ranges") or {}

    def command_at(t: float) -> np.ndarray:
        if schedule is None:
            return keyboard.command
        return schedule[np.searchsorted(schedule[:, 0], t, side="right") - 1, 1:]

    viewer = None
    if not args.headless:
        try:
            import mujoco.viewer

            viewer = mujoco.viewer.launch_passive(model, deployment.data, key_callback=keyboard)
        except Exception as err:  # noqa: BLE001  (no display, no OpenGL: one line, not a traceback)
            raise UsageError(f"no viewer ({str(err).splitlines()[0] if str(err) else type(err).__name__}); "
                             "run with --headless") from None

    record: dict[str, list] = {k: [] for k in ("time", "episode_step", "qpos", "qvel", "command", "obs", "action")}
    falls, warned, steps = 0, set(), 0
    lin_err = ang_err = 0.0
    second_lin = second_steps = 0
    wall_start = time.perf_counter()
    while duration is None or steps * policy_dt < duration - 1e-9:
        if viewer is not None and not viewer.is_running():
            break
        t = steps * policy_dt
        command = np.array(command_at(t), dtype=np.float64)
        for axis, key in enumerate(("lin_vel_x", "lin_vel_y", "ang_vel_z")):
            lo, hi = ranges.get(key, (-math.inf, math.inf))
            if not lo <= command[axis] <= hi and key not in warned:
                warned.add(key)
                print(f"warning: t {t:.2f} s: {key} {command[axis]:+.2f} lies outside the trained range [{lo:g}, {hi:g}]")
        if args.record:
            for key, value in (("time", t), ("episode_step", deployment.episode_step), ("qpos", deployment.data.qpos),
                               ("qvel", deployment.data.qvel), ("command", command)):
                record[key].append(np.array(value, dtype=np.float64))
        obs, action = deployment.step(command)
        steps += 1
        if args.record:
            record["obs"].append(obs)
            record["action"].append(action)
        v_xy, w_z = deployment.base_velocity()
        err = float(np.linalg.norm(v_xy - command[:2]))
        lin_err, ang_err = lin_err + err, ang_err + abs(w_z - command[2])
        second_lin, second_steps = second_lin + err, second_steps + 1
        height = float(deployment.data.qpos[deployment.robot.root_q + 2])
        if height < config["fall_height"]:
            falls += 1
            print(f"FALL at t {steps * policy_dt:.2f} s: base height {height:.3f} m < {config['fall_height']} m; respawning")
            deployment.reset()
        if steps % round(1.0 / policy_dt) == 0:
            print(f"t {steps * policy_dt:5.1f} s  cmd ({command[0]:+.2f}, {command[1]:+.2f}, {command[2]:+.2f})  "
                  f"v ({v_xy[0]:+.2f}, {v_xy[1]:+.2f}, {w_z:+.2f})  height {height:.3f} m  "
                  f"track err {second_lin / second_steps:.3f} m/s", flush=True)
            second_lin = second_steps = 0
        if viewer is not None:
            viewer.sync()
            lag = steps * policy_dt - (time.perf_counter() - wall_start)
            if lag > 0:
                time.sleep(lag)
    if viewer is not None:
        viewer.close()
    if args.record:
        np.savez(args.record, policy_dt=policy_dt, pd_error=deployment.pd_error,
                 **{k: np.stack(v) for k, v in record.items() if v})
    simulated = steps * policy_dt
    print(f"summary: {simulated:.1f} s simulated in {time.perf_counter() - wall_start:.1f} s, falls {falls}, "
          f"tracking error {lin_err / max(steps, 1):.3f} m/s (v_xy), {ang_err / max(steps, 1):.3f} rad/s (yaw rate)")
    if args.pd == "servo":
        print(f"PD check: the config's kps/kds/torque_limits reproduce the model's servo torques to "
              f"{deployment.pd_error:.2e} N m")
    return 1 if falls else 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return run(args)
    except UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
