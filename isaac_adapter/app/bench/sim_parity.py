"""G1 simulator parity: CPU MuJoCo and Isaac Lab (Newton / MuJoCo-Warp) from the same states.

Both simulators are put in the same G1 state, given the same joint position targets, and stepped for
one policy step (``decimation`` physics steps) and for k policy steps; the script prints how far
apart they end up, experiment by experiment:

* ``rest_fall``  the nominal pose released at rest 1 m up, and
* ``free_fall``  walking states lifted 1 m: no contact at all, so only the integrator, the joints
  (armature, friction loss, limits) and the PD drives differ;
* ``stand``      the nominal pose held for 2 s on the floor: steady-state pelvis height, foot
  penetration and the weight each foot carries (contact stiffness at rest);
* ``drop``       the nominal pose released 5 cm above its standing height (contact stiffness and
  damping in an impact);
* ``slide``      the settled stance pushed sideways (and forward) at a given speed: how fast it stops
  tells the effective friction;
* ``walk``       states of a MuJoCo rollout of a walking policy, with that rollout's targets.

Two interpreters are involved, because the project's MuJoCo backends need MuJoCo 4 and Isaac Lab's
Newton pins MuJoCo 3.12::

    # 1. project venv (MuJoCo 4): roll a policy out on CPU MuJoCo, save states and targets
    python benchmarks/sim_parity.py sample docs/checkpoints/g1_clock_it1296.pt --out STATES.npz
    # 2. Isaac Lab venv (isaaclab 3.0, MuJoCo 3.12; ISAACSIM_ASSET_ROOT set): both simulators in one process
    python benchmarks/sim_parity.py compare STATES.npz [--json OUT.json]
    # the same with MuJoCo's own collision detection on the Isaac Lab side (the env uses Newton's)
    python benchmarks/sim_parity.py compare STATES.npz --mujoco-contacts
    # both sides without the self-collision pairs (legs, hands, torso): the floor pairs alone
    python benchmarks/sim_parity.py compare STATES.npz --no-self-collisions
    # contact, joint and solver parameters of both models, side by side, and their mass matrices (Isaac Lab venv)
    python benchmarks/sim_parity.py inspect

In ``compare`` the CPU MuJoCo side is the task's own model (``build_g1_model``, explicit foot-floor
contact pairs) run with MuJoCo 3.12's ``mj_step`` one state at a time; the Isaac Lab side is
``G1WalkDirectEnv`` (one row per state) stepped through its scene exactly as ``DirectRLEnv.step``
does. ``sample`` also stores MuJoCo 4's own next states, so ``compare`` reports how far MuJoCo 3.12
is from MuJoCo 4 on the walking states (the floor under every other number).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[3]  # the checkout

FALL_LIFT_M = 1.0  # free fall: walking states lifted this much (no foot reaches the floor in k steps)
DROP_M = 0.05
STAND_STEPS = 25  # policy steps (0.5 s at 50 Hz): the held nominal pose tips forward and falls after ~1 s
SETTLE_STEPS = 15  # the slide starts from the stance reached after 0.3 s on CPU MuJoCo
DROP_STEPS = 50
SLIDE_STEPS = 40
SLIDE_SPEEDS = ((0.0, 0.5), (0.0, 1.0), (0.0, 2.0), (1.0, 0.0))  # (v_x, v_y) m/s given to the whole robot
WALK_K = 5  # policy steps of the multi-step comparison on the walking states
FALL_K = 10
STOP_SPEED = 0.05  # m/s: the slide has stopped


# -- 1. sampling (project venv, MuJoCo 4) ---------------------------------------------------------------


def sample(args: argparse.Namespace) -> None:
    """Roll ``args.checkpoint`` out on CPU MuJoCo with the task's own commands; save per policy step
    the state before it, the target held during it, and MuJoCo 4's state after it."""
    import mujoco
    import torch

    from isaac_adapter.evaluation import ActorCriticPolicy
    from isaac_adapter.tasks.g1_walk import G1WalkEnv
    from isaac_adapter.tasks.registry import checkpoint_walk_config

    torch.set_grad_enabled(False)
    cfg = checkpoint_walk_config(args.checkpoint, num_envs=args.num_envs, seed=args.seed, device="cpu")
    env = G1WalkEnv(cfg, backend="mujoco")
    obs = env.reset(seed=args.seed)
    policy = ActorCriticPolicy.from_checkpoint(args.checkpoint, obs, env.num_actions)
    batch = env.backend._batch
    qpos_v, qvel_v = batch.bind("qpos"), batch.bind("qvel")
    n, steps = args.num_envs, args.steps
    nq, nv, j = qpos_v.shape[1], qvel_v.shape[1], env.num_actions
    qpos = np.zeros((steps + 1, n, nq))
    qvel = np.zeros((steps + 1, n, nv))
    target = np.zeros((steps, n, j))
    reset = np.zeros((steps, n), dtype=bool)
    qpos[0], qvel[0] = qpos_v, qvel_v
    for t in range(steps):
        res = env.step(policy(obs))
        policy.reset(res.terminated | res.truncated)
        obs = res.obs
        target[t] = env.joint_pos_target.numpy()
        reset[t] = (res.terminated | res.truncated).numpy()
        qpos[t + 1], qvel[t + 1] = qpos_v, qvel_v
    np.savez_compressed(
        args.out, qpos=qpos, qvel=qvel, target=target, reset=reset, joint_names=np.array(env.joint_names),
        commands=env.command.numpy(), sim_dt=cfg.sim_dt, decimation=cfg.decimation, model_variant=cfg.model_variant,
        checkpoint=str(args.checkpoint), mujoco_version=mujoco.__version__,
    )
    print(f"{args.out}: {n} envs x {steps} policy steps from {args.checkpoint} (MuJoCo {mujoco.__version__}), "
          f"{int(reset.sum())} episode ends")


# -- 2. the scenarios ---------------------------------------------------------------------------------


class Scenario:
    """Rows of start states (MuJoCo ``qpos``/``qvel``) with a target per policy step."""

    def __init__(self, name: str, qpos: np.ndarray, qvel: np.ndarray, targets: np.ndarray, steps: int, mj4=None):
        self.name, self.qpos, self.qvel, self.targets, self.steps = name, qpos, qvel, targets, steps
        self.mj4 = mj4  # MuJoCo 4's (qpos, qvel) after one policy step, when known


def walking_states(states: dict[str, Any], rows: int, k: int, seed: int) -> tuple[np.ndarray, ...]:
    """``rows`` (env, step) picks from the rollout with k valid steps after them (no episode end in
    between, past the first second so the gait is under way)."""
    reset = states["reset"]
    steps, n = reset.shape
    rng = np.random.default_rng(seed)
    picks = []
    candidates = [(t, e) for t in range(50, steps - k) for e in range(n) if not reset[max(0, t - 1) : t + k, e].any()]
    for i in rng.permutation(len(candidates))[:rows]:
        picks.append(candidates[i])
    picks.sort()
    t, e = np.array([p[0] for p in picks]), np.array([p[1] for p in picks])
    targets = np.stack([states["target"][t + s, e] for s in range(k)], axis=1)  # [R, k, J]
    mj4 = (states["qpos"][t + 1, e], states["qvel"][t + 1, e])
    return states["qpos"][t, e], states["qvel"][t, e], targets, mj4


def build_scenarios(states: dict[str, Any], nominal: np.ndarray, settled: tuple[np.ndarray, np.ndarray],
                    walk_rows: int, fall_rows: int, seed: int) -> list[Scenario]:
    nq, nv, j = nominal.shape[0], nominal.shape[0] - 1, nominal.shape[0] - 7
    zero_v = np.zeros(nv)
    out = []
    q, v, tg, _ = walking_states(states, fall_rows, FALL_K, seed + 1)
    q = q.copy()
    q[:, 2] += FALL_LIFT_M
    out.append(Scenario("free_fall", q, v, tg, FALL_K))
    out += contact_free_start_scenarios(nominal)
    sq, sv = settled
    q = np.repeat(sq[None], len(SLIDE_SPEEDS), 0)
    v = np.repeat(sv[None], len(SLIDE_SPEEDS), 0)
    for i, (vx, vy) in enumerate(SLIDE_SPEEDS):
        v[i, 0], v[i, 1] = vx, vy
    out.append(Scenario("slide", q, v, np.broadcast_to(nominal[7:], (len(SLIDE_SPEEDS), SLIDE_STEPS, j)), SLIDE_STEPS))
    q, v, tg, mj4 = walking_states(states, walk_rows, WALK_K, seed)
    out.append(Scenario("walk", q, v, tg, WALK_K, mj4))
    return out


# -- 3. CPU MuJoCo side (MuJoCo 3.12 in the Isaac Lab venv) ---------------------------------------------


class MujocoSide:
    """The task's compiled MuJoCo model, one ``MjData`` per row."""

    def __init__(self, model_variant: str, sim_dt: float, decimation: int, self_collisions: bool = True):
        import mujoco

        from isaac_adapter.tasks.g1_walk import assets

        self.mj = mujoco
        g1 = assets.build_g1_model(model_variant, sim_dt, self_collisions=self_collisions)
        self.g1, self.m, self.decimation = g1, g1.model, decimation
        m = self.m
        self.nominal = g1.nominal_qpos
        foot_ids = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, f) for f in assets.FEET]
        self.foot_geoms = [set(np.nonzero(m.geom_bodyid == b)[0].tolist()) for b in foot_ids]
        self.floor = next(g for g in range(m.ngeom) if m.geom_type[g] == mujoco.mjtGeom.mjGEOM_PLANE)

    def settle(self, steps: int) -> tuple[np.ndarray, np.ndarray]:
        """The nominal pose held on the floor for ``steps`` policy steps (the slide's start)."""
        d = self.mj.MjData(self.m)
        d.qpos[:] = self.nominal
        d.ctrl[:] = self.nominal[7:]
        self.mj.mj_forward(self.m, d)
        for _ in range(steps * self.decimation):
            self.mj.mj_step(self.m, d)
        return d.qpos.copy(), d.qvel.copy()

    def foot_contacts(self, d) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per foot: world force on the foot [3], active contact count, min signed distance."""
        force = np.zeros((2, 3))
        count = np.zeros(2, dtype=int)
        dist = np.full(2, np.inf)
        f6 = np.zeros(6)
        for c in range(d.ncon):
            con = d.contact[c]
            for i, geoms in enumerate(self.foot_geoms):
                if con.geom1 in geoms or con.geom2 in geoms:
                    self.mj.mj_contactForce(self.m, d, c, f6)
                    world = con.frame.reshape(3, 3).T @ f6[:3]  # force of geom1 on geom2, world frame
                    force[i] += world if con.geom2 in geoms else -world
                    count[i] += con.dist < 0
                    dist[i] = min(dist[i], con.dist)
        return force, count, dist

    def run(self, qpos: np.ndarray, qvel: np.ndarray, targets: np.ndarray, steps: int) -> dict[str, np.ndarray]:
        rows = qpos.shape[0]
        rec = _empty_record(rows, steps, targets.shape[-1])
        for r in range(rows):
            d = self.mj.MjData(self.m)
            d.qpos[:], d.qvel[:] = qpos[r], qvel[r]
            self.mj.mj_forward(self.m, d)
            for t in range(steps):
                d.ctrl[:] = targets[r, min(t, targets.shape[1] - 1)]
                peak = 0.0
                for _ in range(self.decimation):
                    # d.contact / efc_force stay those of the step just taken (computed before its
                    # integration), as MuJoCo-Warp's data does on the Isaac Lab side
                    self.mj.mj_step(self.m, d)
                    force, count, dist = self.foot_contacts(d)
                    peak = max(peak, float(force[:, 2].sum()))
                rec["fz_peak"][r, t] = peak
                _store(rec, r, t, d.qpos[:3], d.qpos[3:7], d.qvel[:3], _rotate(d.qpos[3:7], d.qvel[3:6]),
                       d.qpos[7:], d.qvel[6:], force, count, dist)
        return rec


def _rotate(quat_wxyz: np.ndarray, vec: np.ndarray) -> np.ndarray:
    """``vec`` (body frame) in the world frame."""
    w, x, y, z = quat_wxyz
    r = np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])  # fmt: skip
    return r @ vec


def _empty_record(rows: int, steps: int, j: int) -> dict[str, np.ndarray]:
    return {
        "pos": np.zeros((rows, steps, 3)), "quat": np.zeros((rows, steps, 4)), "lin_vel": np.zeros((rows, steps, 3)),
        "ang_vel": np.zeros((rows, steps, 3)), "joint_pos": np.zeros((rows, steps, j)),
        "joint_vel": np.zeros((rows, steps, j)), "foot_force": np.zeros((rows, steps, 2, 3)),
        "contacts": np.zeros((rows, steps, 2), dtype=int), "foot_dist": np.zeros((rows, steps, 2)),
        "fz_peak": np.zeros((rows, steps)), "sensor_force": np.zeros((rows, steps, 2, 3)),
    }  # fmt: skip


def _store(rec, r, t, pos, quat, lin, ang, jp, jv, force, count, dist) -> None:
    for key, value in zip(("pos", "quat", "lin_vel", "ang_vel", "joint_pos", "joint_vel", "foot_force", "contacts",
                           "foot_dist"), (pos, quat, lin, ang, jp, jv, force, count, dist)):
        rec[key][r, t] = value


# -- 4. Isaac Lab side ----------------------------------------------------------------------------------


class IsaacSide:
    """``G1WalkDirectEnv`` with one row per start state, stepped through its scene as
    ``DirectRLEnv.step`` does (targets, ``write_data_to_sim``, ``sim.step``, ``scene.update``)."""

    def __init__(self, rows: int, solver_iterations: int | None = None, ls_iterations: int | None = None,
                 mujoco_contacts: bool = False, self_collisions: bool = True):
        import torch

        from isaac_adapter.isaaclab.g1_direct import G1WalkDirectEnv, G1WalkDirectEnvCfg
        from isaac_adapter.tasks.g1_walk import G1WalkConfig

        # nothing here builds a graph; grad stays as it is (in-process callers train afterwards)
        self.torch = torch
        task = G1WalkConfig(num_envs=rows, device="cpu", joint_pos_noise=0.0, model_self_collisions=self_collisions)
        cfg = G1WalkDirectEnvCfg.from_task(task, "cpu")
        if solver_iterations is not None:
            cfg.sim.physics.solver_cfg.iterations = solver_iterations
        if ls_iterations is not None:
            cfg.sim.physics.solver_cfg.ls_iterations = ls_iterations
        cfg.sim.physics.solver_cfg.nconmax = 64
        cfg.sim.physics.solver_cfg.njmax = 400
        if mujoco_contacts:  # MuJoCo's own collision detection instead of Newton's pipeline
            cfg.sim.physics.solver_cfg.use_mujoco_contacts = True
            cfg.sim.physics.collision_cfg = None
        self.env = G1WalkDirectEnv(cfg, task)
        self.env.reset()
        from isaaclab_newton.physics import NewtonManager

        self.solver = NewtonManager._solver
        mjm = self.solver.mj_model
        names = [mjm.body(int(b)).name for b in mjm.geom_bodyid]
        self.foot_geoms = [np.array([n.endswith(f) for n in names]) for f in ("left_ankle_roll_link", "right_ankle_roll_link")]
        self.rows = rows

    def write(self, qpos: np.ndarray, qvel: np.ndarray) -> None:
        torch, env = self.torch, self.env
        ids = torch.arange(self.rows)
        q = torch.as_tensor(qpos, dtype=torch.float32)
        v = torch.as_tensor(qvel, dtype=torch.float32)
        # MuJoCo's free joint: linear velocity of the pelvis origin in the world, angular in the pelvis frame
        ang_w = torch.as_tensor(np.stack([_rotate(qpos[i, 3:7], qvel[i, 3:6]) for i in range(self.rows)]), dtype=torch.float32)
        pose = torch.cat([q[:, :3] + env.scene.env_origins, q[:, [4, 5, 6, 3]]], dim=-1)
        robot = env.robot
        robot.write_root_link_pose_to_sim_index(root_pose=pose, env_ids=ids)
        robot.write_root_link_velocity_to_sim_index(root_velocity=torch.cat([v[:, :3], ang_w], -1), env_ids=ids)
        robot.write_joint_position_to_sim_index(position=q[:, 7:].contiguous(), joint_ids=env._joint_ids, env_ids=ids)
        robot.write_joint_velocity_to_sim_index(velocity=v[:, 6:].contiguous(), joint_ids=env._joint_ids, env_ids=ids)

    def contacts(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per row and foot: the world force on the foot from MuJoCo-Warp's constraint forces (as
        ``mj_contactForce`` decodes a pyramidal cone), active contacts (distance < 0) and the min
        signed distance."""
        data = self.solver.mjw_data
        c = data.contact
        n = int(data.nacon.numpy()[0])
        geom, dist, world = c.geom.numpy()[:n], c.dist.numpy()[:n], c.worldid.numpy()[:n]
        frame, friction, dim = c.frame.numpy()[:n], c.friction.numpy()[:n], c.dim.numpy()[:n]
        address, efc_force = c.efc_address.numpy()[:n], data.efc.force.numpy()
        force = np.zeros((self.rows, 2, 3))
        count = np.zeros((self.rows, 2), dtype=int)
        mind = np.full((self.rows, 2), np.inf)
        for k in range(n):
            g, w = geom[k], world[k]
            for i, foot in enumerate(self.foot_geoms):
                if not (foot[g[0]] or foot[g[1]]):
                    continue
                count[w, i] += dist[k] < 0
                mind[w, i] = min(mind[w, i], dist[k])
                if address[k, 0] < 0:
                    continue
                rows = efc_force[w, address[k, : 2 * (dim[k] - 1)]]
                local = np.zeros(3)
                local[0] = rows.sum()  # pyramid edges: normal = sum, tangent j = mu_j (f_2j - f_2j+1)
                for j in range(dim[k] - 1):
                    local[1 + j] = friction[k, j] * (rows[2 * j] - rows[2 * j + 1])
                world_f = frame[k].reshape(3, 3).T @ local
                force[w, i] += world_f if foot[g[1]] else -world_f
        return force, count, mind

    def run(self, qpos: np.ndarray, qvel: np.ndarray, targets: np.ndarray, steps: int) -> dict[str, np.ndarray]:
        from isaac_adapter.isaaclab.robot import as_torch

        torch, env = self.torch, self.env
        self.write(qpos, qvel)
        env.scene.update(dt=0.0)
        rec = _empty_record(self.rows, steps, targets.shape[-1])
        ids, origins = env._joint_ids, env.scene.env_origins
        for t in range(steps):
            target = torch.as_tensor(targets[:, min(t, targets.shape[1] - 1)], dtype=torch.float32)
            # the env's own clamp (G1WalkDirectEnv._pre_physics_step): MuJoCo clamps ctrl to its range
            target = torch.maximum(torch.minimum(target, env._target_high), env._target_low)
            peak = np.zeros(self.rows)
            for _ in range(env.cfg.decimation):
                env.robot.actuators.target_command.set_position_index(value=target, joint_ids=ids)
                env.scene.write_data_to_sim()
                env.sim.step(render=False)
                env.scene.update(dt=env.physics_dt)
                fz = as_torch(env.feet_contact.data.net_forces_w)[:, env._contact_ids, 2].sum(-1).numpy()
                peak = np.maximum(peak, fz)
            rec["fz_peak"][:, t] = peak
            d = env.robot.data
            sensor = as_torch(env.feet_contact.data.net_forces_w)[:, env._contact_ids].numpy()
            force, count, dist = self.contacts()
            rec["sensor_force"][:, t] = sensor
            pos = (as_torch(d.root_link_pos_w) - origins).numpy()
            quat = as_torch(d.root_link_quat_w)[:, [3, 0, 1, 2]].numpy()
            lin, ang = as_torch(d.root_link_lin_vel_w).numpy(), as_torch(d.root_link_ang_vel_w).numpy()
            jp, jv = as_torch(d.joint_pos)[:, ids].numpy(), as_torch(d.joint_vel)[:, ids].numpy()
            for r in range(self.rows):
                _store(rec, r, t, pos[r], quat[r], lin[r], ang[r], jp[r], jv[r], force[r], count[r], dist[r])
        return rec


# -- 5. metrics and the table ----------------------------------------------------------------------------


def _split(rec: dict[str, np.ndarray], rows: slice) -> dict[str, np.ndarray]:
    return {k: v[rows] for k, v in rec.items()}


def _rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(x))))


def diff_row(name: str, a: dict, b: dict, t: int) -> dict[str, float]:
    """MuJoCo (a) vs Isaac Lab (b) after policy step ``t`` (0-based) across the rows of a scenario."""
    fa, fb = a["foot_force"][:, t], b["foot_force"][:, t]
    return {
        "case": name,
        "root_z_mm": 1e3 * float(np.abs(a["pos"][:, t, 2] - b["pos"][:, t, 2]).mean()),
        "root_xy_mm": 1e3 * float(np.linalg.norm(a["pos"][:, t, :2] - b["pos"][:, t, :2], axis=-1).mean()),
        "lin_vel": float(np.linalg.norm(a["lin_vel"][:, t] - b["lin_vel"][:, t], axis=-1).mean()),
        "ang_vel": float(np.linalg.norm(a["ang_vel"][:, t] - b["ang_vel"][:, t], axis=-1).mean()),
        "jpos_rms": _rms(a["joint_pos"][:, t] - b["joint_pos"][:, t]),
        "jvel_rms": _rms(a["joint_vel"][:, t] - b["joint_vel"][:, t]),
        "Fn_mj": float(fa[..., 2].sum(-1).mean()), "Fn_il": float(fb[..., 2].sum(-1).mean()),
        "Ft_mj": float(np.linalg.norm(fa[..., :2], axis=-1).sum(-1).mean()),
        "Ft_il": float(np.linalg.norm(fb[..., :2], axis=-1).sum(-1).mean()),
        "n_mj": float(a["contacts"][:, t].sum(-1).mean()), "n_il": float(b["contacts"][:, t].sum(-1).mean()),
    }


COLUMNS = (("case", "%-15s"), ("root_z_mm", "%9.2f"), ("root_xy_mm", "%9.2f"), ("lin_vel", "%8.3f"),
           ("ang_vel", "%8.3f"), ("jpos_rms", "%8.4f"), ("jvel_rms", "%8.3f"), ("Fn_mj", "%7.1f"), ("Fn_il", "%7.1f"),
           ("Ft_mj", "%6.1f"), ("Ft_il", "%6.1f"), ("n_mj", "%5.1f"), ("n_il", "%5.1f"))  # fmt: skip


def print_table(rows: list[dict[str, float]]) -> None:
    print("  ".join(("%-15s" if c == "case" else "%9s" if "mm" in c else "%8s" if c in ("lin_vel", "ang_vel", "jpos_rms",
          "jvel_rms") else "%7s" if c.startswith("Fn") else "%6s" if c.startswith("Ft") else "%5s") % c for c, _ in COLUMNS))
    for row in rows:
        print("  ".join(fmt % row[c] for c, fmt in COLUMNS))


def stop_time(lin_vel: np.ndarray, dt: float) -> float:
    """Seconds until the horizontal speed first drops below :data:`STOP_SPEED` (nan if never)."""
    speed = np.linalg.norm(lin_vel[:, :2], axis=-1)
    below = np.nonzero(speed < STOP_SPEED)[0]
    return float((below[0] + 1) * dt) if below.size else float("nan")


def summarize(scenarios: list[Scenario], mj: dict, il: dict, policy_dt: float, mujoco_side: MujocoSide) -> dict[str, Any]:
    out: dict[str, Any] = {"table": []}
    table = out["table"]
    for s in scenarios:
        a, b = mj[s.name], il[s.name]
        if s.name in ("free_fall", "walk", "rest_fall"):
            table.append(diff_row(f"{s.name} 1 step", a, b, 0))
            table.append(diff_row(f"{s.name} {s.steps} steps", a, b, s.steps - 1))
        elif s.name == "stand":
            for t in (0, 9, s.steps - 1):
                table.append(diff_row(f"stand {t + 1} steps", a, b, t))
            w = slice(9, s.steps)  # 0.2-0.5 s: landed from the spawn, not yet tipping over
            out["stand"] = {
                "root_z_m": (float(a["pos"][0, w, 2].mean()), float(b["pos"][0, w, 2].mean())),
                "foot_min_dist_mm": (1e3 * float(a["foot_dist"][0, w].min(-1).mean()),
                                     1e3 * float(b["foot_dist"][0, w].min(-1).mean())),
                "Fz_left_right_N": (a["foot_force"][0, w, :, 2].mean(0).round(1).tolist(),
                                    b["foot_force"][0, w, :, 2].mean(0).round(1).tolist()),
                "active_contacts": (a["contacts"][0, w].mean(0).round(2).tolist(), b["contacts"][0, w].mean(0).round(2).tolist()),
                "weight_N": float(mujoco_side.m.body_subtreemass[1] * 9.81),
            }
        elif s.name == "drop":
            table.append(diff_row("drop 1 step", a, b, 0))
            table.append(diff_row(f"drop {s.steps} steps", a, b, s.steps - 1))
            fz_a, fz_b = a["foot_force"][0, :, :, 2].sum(-1), b["foot_force"][0, :, :, 2].sum(-1)
            out["drop"] = {
                "min_root_z_m": (float(a["pos"][0, :, 2].min()), float(b["pos"][0, :, 2].min())),
                "peak_Fz_N": (float(a["fz_peak"][0].max()), float(b["fz_peak"][0].max())),
                "first_contact_step": (_first(fz_a > 1.0), _first(fz_b > 1.0)),
                "root_z_at_step_10_m": (float(a["pos"][0, 9, 2]), float(b["pos"][0, 9, 2])),
                "final_root_z_m": (float(a["pos"][0, -1, 2]), float(b["pos"][0, -1, 2])),
            }
        elif s.name == "slide":
            slides = []
            for r, (vx, vy) in enumerate(SLIDE_SPEEDS):
                v0 = math.hypot(vx, vy)
                ta, tb = stop_time(a["lin_vel"][r], policy_dt), stop_time(b["lin_vel"][r], policy_dt)
                da = float(np.linalg.norm(a["pos"][r, -1, :2] - s.qpos[r, :2]))
                db = float(np.linalg.norm(b["pos"][r, -1, :2] - s.qpos[r, :2]))
                slides.append({
                    "v0 (vx,vy)": (vx, vy), "stop_s": (ta, tb), "slid_m": (da, db),
                    # the friction coefficient if the robot slid to rest as one block (it also tips and rolls)
                    "v0^2/(2 g slid)": (v0 * v0 / (2 * 9.81 * da) if da > 1e-6 else float("nan"),
                                        v0 * v0 / (2 * 9.81 * db) if db > 1e-6 else float("nan")),
                    "Ft/Fn 1st step": (_ratio(a["foot_force"][r, 0]), _ratio(b["foot_force"][r, 0])),
                })
            out["slide"] = slides
            table.append(diff_row("slide 1 step", a, b, 0))
            table.append(diff_row(f"slide {s.steps} steps", a, b, s.steps - 1))
    walk = next((s for s in scenarios if s.name == "walk"), None)
    if walk is not None and walk.mj4 is not None:
        q4, v4 = walk.mj4
        a = mj["walk"]
        out["mujoco3_vs_4_walk_1step"] = {
            "root_z_mm": 1e3 * float(np.abs(a["pos"][:, 0, 2] - q4[:, 2]).mean()),
            "lin_vel": float(np.linalg.norm(a["lin_vel"][:, 0] - v4[:, :3], axis=-1).mean()),
            "jvel_rms": _rms(a["joint_vel"][:, 0] - v4[:, 6:]),
        }
    return out


def _first(mask: np.ndarray) -> int:
    """1-based index of the first true entry (0 if none)."""
    hits = np.nonzero(mask)[0]
    return int(hits[0]) + 1 if hits.size else 0


def _ratio(force: np.ndarray) -> float:
    fn = force[:, 2].sum()
    return float(np.linalg.norm(force[:, :2].sum(0)) / fn) if fn > 1e-6 else float("nan")


def run_compare(states_path: str | None, walk_rows: int = 24, fall_rows: int = 8, seed: int = 0,
                solver_iterations: int | None = None, ls_iterations: int | None = None,
                only: tuple[str, ...] | None = None, mujoco_contacts: bool = False,
                self_collisions: bool = True) -> dict[str, Any]:
    """Both simulators on the scenarios; returns the summary with the per-step records.

    Without ``states_path`` (no MuJoCo 4 rollout at hand) only the scenarios that need none run:
    ``stand``, ``drop`` and ``rest_fall`` (the nominal pose released 1 m up, at rest)."""
    if states_path is None:
        mjs = MujocoSide("menagerie_mjx", 0.005, 4, self_collisions)
        scenarios = contact_free_start_scenarios(mjs.nominal)
    else:
        states = dict(np.load(states_path, allow_pickle=False))
        mjs = MujocoSide(str(states["model_variant"]), float(states["sim_dt"]), int(states["decimation"]), self_collisions)
        settled = mjs.settle(SETTLE_STEPS)
        scenarios = build_scenarios(states, mjs.nominal, settled, walk_rows, fall_rows, seed)
        if not self_collisions:  # the rollout's MuJoCo 4 states had the pairs: no like-for-like floor
            for scenario in scenarios:
                scenario.mj4 = None
    if only:
        scenarios = [s for s in scenarios if s.name in only]
    return run_scenarios(scenarios, mjs, solver_iterations, ls_iterations, mujoco_contacts, self_collisions)


def contact_free_start_scenarios(nominal: np.ndarray) -> list[Scenario]:
    """``rest_fall``, ``stand`` and ``drop``: start states that need no rollout."""
    j, nv = nominal.shape[0] - 7, nominal.shape[0] - 1
    hold = np.broadcast_to(nominal[7:], (1, STAND_STEPS, j))
    high = nominal[None].copy()
    high[0, 2] += FALL_LIFT_M
    drop = nominal[None].copy()
    drop[0, 2] += DROP_M
    return [
        Scenario("rest_fall", high, np.zeros((1, nv)), hold[:, :FALL_K], FALL_K),
        Scenario("stand", nominal[None].copy(), np.zeros((1, nv)), hold, STAND_STEPS),
        Scenario("drop", drop, np.zeros((1, nv)), np.broadcast_to(nominal[7:], (1, DROP_STEPS, j)), DROP_STEPS),
    ]


def run_scenarios(scenarios: list[Scenario], mjs: MujocoSide, solver_iterations: int | None = None,
                  ls_iterations: int | None = None, mujoco_contacts: bool = False,
                  self_collisions: bool = True) -> dict[str, Any]:
    """CPU MuJoCo row by row, then one Isaac Lab env holding every row (each in its own world)."""
    t0 = time.perf_counter()
    mj = {s.name: mjs.run(s.qpos, s.qvel, s.targets, s.steps) for s in scenarios}
    t_mj = time.perf_counter() - t0
    total = sum(s.qpos.shape[0] for s in scenarios)
    isaac = IsaacSide(total, solver_iterations, ls_iterations, mujoco_contacts, self_collisions)
    t0 = time.perf_counter()
    qpos = np.concatenate([s.qpos for s in scenarios])
    qvel = np.concatenate([s.qvel for s in scenarios])
    steps = max(s.steps for s in scenarios)
    targets = np.concatenate([_pad(s.targets, steps) for s in scenarios])
    rec = isaac.run(qpos, qvel, targets, steps)
    il, start = {}, 0
    for s in scenarios:
        rows = slice(start, start + s.qpos.shape[0])
        il[s.name] = {k: v[rows, : s.steps] for k, v in rec.items()}
        start = rows.stop
    t_il = time.perf_counter() - t0
    out = summarize(scenarios, mj, il, mjs.m.opt.timestep * mjs.decimation, mjs)
    out["seconds"] = {"mujoco": round(t_mj, 1), "isaaclab": round(t_il, 1)}
    out["records"] = {"mujoco": mj, "isaaclab": il}
    return out


def _pad(targets: np.ndarray, steps: int) -> np.ndarray:
    """Targets ``[R, k, J]`` held at their last value up to ``steps``."""
    if targets.shape[1] >= steps:
        return np.asarray(targets[:, :steps])
    last = np.repeat(targets[:, -1:], steps - targets.shape[1], axis=1)
    return np.concatenate([targets, last], axis=1)


def compare(args: argparse.Namespace) -> None:
    out = run_compare(args.states, args.walk_rows, args.fall_rows, args.seed, args.solver_iterations, args.ls_iterations,
                      mujoco_contacts=args.mujoco_contacts, self_collisions=not args.no_self_collisions)
    contacts = "MuJoCo's collision detection" if args.mujoco_contacts else "Newton's collision pipeline"
    pairs = "floor pairs only" if args.no_self_collisions else "explicit pairs"
    print(f"MuJoCo (CPU, {pairs}) vs Isaac Lab (Newton / MuJoCo-Warp, {contacts}), states from {args.states}")
    print("mean |difference| over a case's rows after N policy steps (root_z/xy in mm, velocities in m/s and rad/s, "
          "joint rms in rad and rad/s); Fn/Ft: total foot normal/tangential force (N), n: active foot contacts")
    print_table(out["table"])
    for key in ("stand", "drop"):
        if key not in out:
            continue
        print(f"{key}: " + "; ".join(f"{k} mj={_fmt(v[0])} il={_fmt(v[1])}" for k, v in out[key].items()
                                      if isinstance(v, tuple)) + (f"; weight {out[key]['weight_N']:.1f} N" if key == "stand" else ""))
    for s in out.get("slide", []):
        print("slide v0=%s: " % (s["v0 (vx,vy)"],) + "; ".join(f"{k} mj={_fmt(v[0])} il={_fmt(v[1])}"
                                                               for k, v in s.items() if k != "v0 (vx,vy)"))
    if "mujoco3_vs_4_walk_1step" in out:
        print("MuJoCo 3.12 vs the rollout's MuJoCo 4, walk 1 step: " + ", ".join(
            f"{k} {v:.4g}" for k, v in out["mujoco3_vs_4_walk_1step"].items()))
    print(f"seconds: {out['seconds']}")
    if args.json:
        slim = {k: v for k, v in out.items() if k != "records"}
        Path(args.json).write_text(json.dumps(slim, indent=1, default=float))


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


# -- 6. model parameters -----------------------------------------------------------------------------------


def inspect(args: argparse.Namespace) -> None:
    """Foot and floor contact parameters, joint parameters and solver options of both models."""
    import mujoco

    side = IsaacSide(1, args.solver_iterations, args.ls_iterations)
    mjs = MujocoSide("menagerie_mjx", 0.005, 4)
    m = mjs.m
    print("CPU MuJoCo (explicit <pair>s, the values the solver uses):")
    for p in range(m.npair):
        g1, g2 = m.pair_geom1[p], m.pair_geom2[p]
        names = (m.geom(g1).name, m.geom(g2).name)
        if any("foot" in n for n in names) and "floor" in names:
            print(f"  pair {names}: condim {m.pair_dim[p]} friction {m.pair_friction[p].round(5).tolist()} "
                  f"solref {m.pair_solref[p].tolist()} solimp {m.pair_solimp[p].round(4).tolist()} "
                  f"margin {m.pair_margin[p]} gap {m.pair_gap[p]}")
    print(f"  opt: integrator {mujoco.mjtIntegrator(m.opt.integrator).name} cone {mujoco.mjtCone(m.opt.cone).name} "
          f"iterations {m.opt.iterations} ls_iterations {m.opt.ls_iterations} tolerance {m.opt.tolerance} "
          f"timestep {m.opt.timestep} impratio {m.opt.impratio}")
    mw = side.solver.mjw_model
    mjm = side.solver.mj_model
    print("Isaac Lab / Newton -> MuJoCo-Warp (per-geom values that contact_params mixes):")
    arrays = {k: getattr(mw, k).numpy() for k in ("geom_friction", "geom_solref", "geom_solimp", "geom_margin", "geom_gap",
                                                  "geom_solmix")}
    prio, condim = mw.geom_priority.numpy(), mw.geom_condim.numpy()
    for g in range(mjm.ngeom):
        name = mjm.geom(g).name
        if mjm.geom_type[g] == mujoco.mjtGeom.mjGEOM_PLANE or "foot1" in name:
            print(f"  {name.rsplit('/', 1)[-1]}: condim {condim[g]} priority {prio[g]} friction "
                  f"{arrays['geom_friction'][0, g].round(5).tolist()} solref {arrays['geom_solref'][0, g].tolist()} "
                  f"solimp {arrays['geom_solimp'][0, g].round(4).tolist()} margin {arrays['geom_margin'][0, g]} "
                  f"gap {arrays['geom_gap'][0, g]} solmix {arrays['geom_solmix'][0, g]}")
    o = mw.opt
    print(f"  opt: integrator {int(o.integrator)} cone {int(o.cone)} iterations {int(o.iterations)} "
          f"ls_iterations {int(o.ls_iterations)} tolerance {float(o.tolerance.numpy()[0])} "
          f"timestep {float(o.timestep.numpy()[0])} impratio_invsqrt {float(o.impratio_invsqrt.numpy()[0])}")
    dof = slice(6, None)
    for key, ours in (("dof_armature", m.dof_armature), ("dof_damping", m.dof_damping), ("dof_frictionloss", m.dof_frictionloss)):
        theirs = getattr(mw, key).numpy().reshape(-1, mjm.nv)[0]
        print(f"  {key}: max |MuJoCo - Isaac| over the 29 joints (matched by name) "
              f"{_by_name(m, ours[dof], mjm, theirs[dof]):.3g}")
    mass_matrix, bias = _dynamics_gap(m, mjm, mjs.nominal)
    print(f"  at the nominal pose with random joint velocities: max |M_MuJoCo - M_Isaac| {mass_matrix:.3g} "
          f"(joint space, matched by name), max |gravity + Coriolis difference| {bias:.3g}")


def _joint_index(mjm, name: str) -> int:
    """The joint of Isaac Lab's MuJoCo model named ``name`` (Newton's names are the USD paths with
    "/" as "_", plus an index)."""
    match = [j for j in range(mjm.njnt) if re.search(rf"(^|[_/]){name}(_\d+)?$", mjm.joint(j).name)]
    if len(match) != 1:
        raise RuntimeError(f"joint {name} matches {len(match)} joints of the Isaac Lab model")
    return match[0]


def _dynamics_gap(m, mjm, qpos: np.ndarray, seed: int = 0) -> tuple[float, float]:
    """Both models in the same state: the largest difference of their joint-space mass matrices and
    of their bias forces (gravity, Coriolis), dofs matched by joint name."""
    import mujoco

    d1, d2 = mujoco.MjData(m), mujoco.MjData(mjm)
    qvel = np.random.default_rng(seed).normal(0.0, 1.0, m.nv)
    d1.qpos[:], d1.qvel[:] = qpos, qvel
    d2.qpos[:7], d2.qvel[:6] = qpos[:7], qvel[:6]
    ours, theirs = list(range(6)), list(range(6))
    for j in range(1, m.njnt):
        t = _joint_index(mjm, m.joint(j).name)
        d2.qpos[mjm.jnt_qposadr[t]] = qpos[m.jnt_qposadr[j]]
        d2.qvel[mjm.jnt_dofadr[t]] = qvel[m.jnt_dofadr[j]]
        ours.append(int(m.jnt_dofadr[j]))
        theirs.append(int(mjm.jnt_dofadr[t]))
    mujoco.mj_forward(m, d1)
    mujoco.mj_forward(mjm, d2)
    full1, full2 = np.zeros((m.nv, m.nv)), np.zeros((mjm.nv, mjm.nv))
    mujoco.mj_fullM(m, d1, full1)
    mujoco.mj_fullM(mjm, d2, full2)
    gap_m = np.abs(full1[np.ix_(ours, ours)] - full2[np.ix_(theirs, theirs)]).max()
    return float(gap_m), float(np.abs(d1.qfrc_bias[ours] - d2.qfrc_bias[theirs]).max())


def _by_name(m, a: np.ndarray, mjm, b: np.ndarray) -> float:
    """Max difference of per-dof values matched by joint name (Isaac Lab's joints are ordered differently)."""
    na = {m.joint(int(m.dof_jntid[6 + i])).name: a[i] for i in range(a.shape[0])}
    nb = {int(mjm.dof_jntid[6 + i]): b[i] for i in range(b.shape[0])}
    return max(abs(value - nb[_joint_index(mjm, name)]) for name, value in na.items())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("sample", help="project venv: roll a checkpoint out on CPU MuJoCo, save states")
    p.add_argument("checkpoint")
    p.add_argument("--out", required=True)
    p.add_argument("--num-envs", type=int, default=16)
    p.add_argument("--steps", type=int, default=250)
    p.add_argument("--seed", type=int, default=0)
    for name in ("compare", "inspect"):
        p = sub.add_parser(name)
        if name == "compare":
            p.add_argument("states", nargs="?", help="sample's file; without it only rest_fall, stand and drop run")
            p.add_argument("--walk-rows", type=int, default=24)
            p.add_argument("--fall-rows", type=int, default=8)
            p.add_argument("--seed", type=int, default=0)
            p.add_argument("--json")
            p.add_argument("--mujoco-contacts", action="store_true",
                           help="Isaac Lab side: MuJoCo's collision detection instead of Newton's pipeline (the env's)")
            p.add_argument("--no-self-collisions", action="store_true",
                           help="both sides: only the floor's contact pairs (the robot's own pairs off)")
        p.add_argument("--solver-iterations", type=int, help="Isaac Lab's MJWarp iterations (default: the env's)")
        p.add_argument("--ls-iterations", type=int)
    args = parser.parse_args(argv)
    {"sample": sample, "compare": compare, "inspect": inspect}[args.cmd](args)


if __name__ == "__main__":
    main()
