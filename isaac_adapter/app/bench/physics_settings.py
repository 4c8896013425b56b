"""Cheaper physics for the G1: what a solver budget or a dt / decimation trade does to the dynamics.

    python benchmarks/physics_settings.py
    python benchmarks/physics_settings.py --settings "dt=0.004,dec=5,it=3,ls=4" "dt=0.005,dec=4,it=2,ls=2"
    python benchmarks/physics_settings.py --settings "dt=0.01,dec=2" "dt=0.01,dec=2,solver=cg,it=20"
    python benchmarks/physics_settings.py --json physics_settings.json

A setting is ``dt=SIM_DT,dec=DECIMATION[,solver=SOLVER][,it=ITERATIONS][,ls=LS_ITERATIONS]``
(``solver``: ``newton`` or ``cg``; ``solver`` / ``it`` / ``ls`` absent or ``file``: the model file's
``opt.solver`` / ``opt.iterations`` / ``opt.ls_iterations``; menagerie_mjx: Newton, 5 and 8). Every
setting must keep the checkpoint's policy step (``dt * dec``, 20 ms). The reference is the physics
the checkpoint recorded (``registry.checkpoint_walk_config``: 0.005 x 4, the file's solver); it is
always the first row. Per setting, all on CPU MuJoCo:

* one-step divergence: the checkpoint's deterministic policy walks ``--num-envs`` envs at
  ``--command`` (0.5 m/s forward) for ``--seconds`` under the reference physics; before every policy
  step the integration state of every env (``mjSTATE_INTEGRATION``: positions, velocities, the
  solver's warm start) and the step's joint targets are kept. Each setting then re-runs every kept
  state for one policy step (``dec`` substeps of ``dt``) with the same targets on one ``MjData``; the
  table gives the RMS difference from the reference re-run of the 29 joint velocities (rad/s) and of
  the root linear velocity (m/s, world frame) after the step, pooled over states and components.
  The reference re-run reproduces the rollout's next state bit for bit (checked and printed), so
  these differences are the integrator / solver difference alone, from identical starts.
* solver: over the same re-runs, the mean constraint-solver iterations per substep (the most of any
  island) and the share of substeps that used the whole ``opt.iterations`` budget (stopped by the
  cap, or converged on exactly the last allowed iteration: MuJoCo reports the count, not which).
* cost: microseconds of physics (``mj_step`` calls only) per env per policy step, one thread, over
  the same re-runs; a rough relative CPU cost. GPU (MuJoCo Warp) throughput is measured separately
  (``benchmarks/env_gpu.py``, ``benchmarks/train_gpu.py``).
* closed loop: the walking gate (:mod:`isaac_adapter.evaluation.gate`, as ``benchmarks/g1_gate.py``
  runs it) with the checkpoint's recorded config and the setting's ``sim_dt``, ``decimation``,
  ``solver``, ``solver_iterations`` and ``ls_iterations`` in place of its physics, once per ``--gate-seeds``
  value: the first seed's rollout is the gate's verdict (seed 0, as ``g1_gate.py``); the others give
  each line's spread over spawn noise, against which a setting's shift can be read.

Torch runs on one thread (``--threads``): on a 2-core machine, two torch threads beside MuJoCo's
thread pool made each policy forward pass about 100x slower.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import mujoco
import numpy as np
import torch

from isaac_adapter.tasks.g1_walk.config import SOLVERS

CHECKPOINT = "docs/checkpoints/g1_clock_it1296.pt"
DEFAULT_SETTINGS = (
    "dt=0.005,dec=4",
    "dt=0.005,dec=4,it=3,ls=4",
    "dt=0.005,dec=4,it=2,ls=2",
    "dt=0.004,dec=5",
    "dt=0.004,dec=5,it=3,ls=4",
    "dt=0.01,dec=2",
)
_STATE = mujoco.mjtState.mjSTATE_INTEGRATION


# -- pure helpers --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    """Physics of one row: substep ``sim_dt`` (s), ``decimation`` substeps per policy step, and the
    constraint solver and its budget (None: the model file's)."""

    sim_dt: float
    decimation: int
    iterations: int | None = None
    ls_iterations: int | None = None
    file_sensors: bool = False  # the model file's IMU sensors kept (cost only: the dynamics are the same)
    solver: str | None = None  # "newton" or "cg"

    @property
    def policy_dt(self) -> float:
        return self.sim_dt * self.decimation

    def config_overrides(self) -> dict:
        """The :class:`~isaac_adapter.tasks.g1_walk.config.G1WalkConfig` fields this setting sets."""
        return {"sim_dt": self.sim_dt, "decimation": self.decimation,
                "solver_iterations": self.iterations, "ls_iterations": self.ls_iterations,
                "model_file_sensors": self.file_sensors, "solver": self.solver}

    def resolved(self, file_iterations: int, file_ls_iterations: int, file_solver: str) -> Setting:
        """The same physics with the file's solver and budget written out (for comparing settings)."""
        return replace(self, iterations=self.iterations if self.iterations is not None else file_iterations,
                       ls_iterations=self.ls_iterations if self.ls_iterations is not None else file_ls_iterations,
                       solver=self.solver if self.solver is not None else file_solver)

    def label(self) -> str:
        """``"dt 0.005 x4, it file, ls file"``, ``"dt 0.004 x5, it 3, ls 4"``, ``"dt 0.01 x2, cg, it 20, ls file"``."""
        solver = "" if self.solver is None else f", {self.solver}"
        it = "file" if self.iterations is None else str(self.iterations)
        ls = "file" if self.ls_iterations is None else str(self.ls_iterations)
        sensors = ", file sensors" if self.file_sensors else ""
        return f"dt {self.sim_dt:g} x{self.decimation}{solver}, it {it}, ls {ls}{sensors}"


def _positive_int(key: str, value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"{key} must be a positive integer, got {value!r}") from None
    if number < 1:
        raise ValueError(f"{key} must be a positive integer, got {value!r}")
    return number


def parse_setting(text: str) -> Setting:
    """``"dt=0.004,dec=5,it=3,ls=4"`` -> :class:`Setting`. ``dt`` and ``dec`` are required; ``solver``
    (``newton``, ``cg``), ``it`` and ``ls`` are optional (absent or ``file``: the model file's), and so
    is ``sensors`` (``task``, the default: the task's foot sensors only; ``file``: the model file's sensors too). Raises
    ``ValueError`` on anything else."""
    fields: dict[str, str] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not value:
            raise ValueError(f"{text!r}: expected key=value, got {part.strip()!r}")
        if key not in ("dt", "dec", "solver", "it", "ls", "sensors"):
            raise ValueError(f"{text!r}: unknown key {key!r} (keys: dt, dec, solver, it, ls, sensors)")
        if key in fields:
            raise ValueError(f"{text!r}: {key} given twice")
        fields[key] = value
    missing = [k for k in ("dt", "dec") if k not in fields]
    if missing:
        raise ValueError(f"{text!r}: {' and '.join(missing)} required")
    try:
        sim_dt = float(fields["dt"])
    except ValueError:
        raise ValueError(f"{text!r}: dt must be a number, got {fields['dt']!r}") from None
    if not (math.isfinite(sim_dt) and sim_dt > 0):
        raise ValueError(f"{text!r}: dt must be positive, got {fields['dt']!r}")
    budget = {k: None if fields.get(k, "file") == "file" else _positive_int(k, fields[k]) for k in ("it", "ls")}
    sensors = fields.get("sensors", "task")
    if sensors not in ("task", "file"):
        raise ValueError(f"{text!r}: sensors must be task or file, got {sensors!r}")
    solver = fields.get("solver", "file")
    if solver not in (*SOLVERS, "file"):
        raise ValueError(f"{text!r}: solver must be {', '.join(SOLVERS)} or file, got {solver!r}")
    return Setting(sim_dt, _positive_int("dec", fields["dec"]), budget["it"], budget["ls"], sensors == "file",
                   None if solver == "file" else solver)


def rms(x: np.ndarray) -> float:
    """Root mean square over every element; nan for an empty array."""
    x = np.asarray(x, dtype=np.float64)
    return float(np.sqrt(np.mean(np.square(x)))) if x.size else math.nan


def rms_diff(a: np.ndarray, b: np.ndarray) -> float:
    """RMS of ``a - b`` over every element (same shapes)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {a.shape} vs {b.shape}")
    return rms(a - b)


def cap_share(niter: np.ndarray, cap: int) -> float:
    """Share of substeps whose solver iterations ``niter`` reached the budget ``cap``."""
    niter = np.asarray(niter)
    return float(np.mean(niter >= cap)) if niter.size else math.nan


# -- measurements --------------------------------------------------------------------------------


def reference_states(checkpoint: str, ref: Setting, num_envs: int, seconds: float, command: tuple, seed: int,
                     physics_threads: int) -> dict:
    """Walk the checkpoint's policy under ``ref`` physics; keep every env's integration state before each
    policy step, its joint targets, and the state after the step (for the bit-for-bit check)."""
    from isaac_adapter.evaluation import ActorCriticPolicy
    from isaac_adapter.evaluation.g1_probe import G1WalkProbe
    from isaac_adapter.tasks.g1_walk import G1WalkEnv
    from isaac_adapter.tasks.registry import checkpoint_walk_config
    from ppo_bootstrap.episode import done_mask

    cfg = checkpoint_walk_config(checkpoint, num_envs=num_envs, seed=seed, physics_threads=physics_threads,
                                 **ref.config_overrides())
    env = G1WalkEnv(cfg)
    probe = G1WalkProbe(env)
    obs = probe.reset(seed, torch.tensor(command, dtype=torch.float32).expand(num_envs, 3))
    policy = ActorCriticPolicy.from_checkpoint(checkpoint, obs, env.num_actions)
    steps = max(1, round(seconds / cfg.policy_dt))
    before, targets, after, continued = [], [], [], []
    falls = 0
    for _ in range(steps):
        actions = policy(obs)
        before.append(env.backend.state_dict()["state"])
        result = env.step(actions)
        targets.append(env.joint_pos_target.to(torch.float64).numpy().copy())
        after.append(env.backend.state_dict()["state"])
        done = done_mask(result.terminated, result.truncated)
        continued.append(~done.numpy())
        falls += int(result.terminated.sum())
        policy.reset(done)
        obs = result.obs
    return {"before": np.concatenate(before), "targets": np.concatenate(targets), "after": np.concatenate(after),
            "continued": np.concatenate(continued), "falls": falls, "steps": steps,
            "model_variant": cfg.model_variant}


def one_step_reruns(settings: list[Setting], model_variant: str, states: dict) -> tuple[list[dict], dict]:
    """Re-run every kept state for one policy step under each setting (interleaved, one thread): per
    setting its row of divergence, solver and cost figures, and the reference's scale and bit-for-bit check."""
    from isaac_adapter.tasks.g1_walk import assets

    models = [assets.build_g1_model(model_variant, s.sim_dt, s.iterations, s.ls_iterations, solver=s.solver).model
              for s in settings]
    datas = [mujoco.MjData(m) for m in models]
    size = states["before"].shape[1]
    for m in models:
        if mujoco.mj_stateSize(m, _STATE) != size:
            raise RuntimeError("the settings' models do not share the state layout of the reference")
    n_samples = states["before"].shape[0]
    qvel = [np.empty((n_samples, m.nv)) for m in models]
    niter = [np.empty((n_samples, s.decimation), dtype=np.int64) for s in settings]
    seconds = [0.0] * len(settings)
    ref_after = np.empty_like(states["before"])
    clock = time.perf_counter
    for i in range(n_samples):
        for k, (s, m, d) in enumerate(zip(settings, models, datas)):
            mujoco.mj_setState(m, d, states["before"][i], _STATE)
            d.ctrl[:] = states["targets"][i]
            spent = 0.0
            for j in range(s.decimation):
                t0 = clock()
                mujoco.mj_step(m, d)
                spent += clock() - t0
                niter[k][i, j] = int(d.solver_niter[: max(1, d.nisland)].max())
            seconds[k] += spent
            qvel[k][i] = d.qvel
            if k == 0:
                mujoco.mj_getState(m, d, ref_after[i], _STATE)
    cont = states["continued"]
    reproduced = bool(np.array_equal(ref_after[cont], states["after"][cont]))
    ref_qvel = qvel[0]
    before_qvel = _qvel_of_states(models[0], datas[0], states["before"])
    rows = []
    for k, (s, m) in enumerate(zip(settings, models)):
        per_state = np.sqrt(np.mean((qvel[k][:, 6:] - ref_qvel[:, 6:]) ** 2, axis=1))
        rows.append({
            "joint_vel_rms_diff": rms_diff(qvel[k][:, 6:], ref_qvel[:, 6:]),
            "root_lin_vel_rms_diff": rms_diff(qvel[k][:, :3], ref_qvel[:, :3]),
            "joint_vel_rms_diff_p99": float(np.percentile(per_state, 99)),
            "solver": assets.option_name(mujoco.mjtSolver, m.opt.solver),
            "solver_iterations": int(m.opt.iterations),
            "ls_iterations": int(m.opt.ls_iterations),
            "solver_iter_mean": float(niter[k].mean()),
            "solver_at_cap_share": cap_share(niter[k], int(m.opt.iterations)),
            "us_per_env_step": 1e6 * seconds[k] / n_samples,
        })
    scale = {"joint_vel_rms": rms(ref_qvel[:, 6:]),
             "joint_vel_change_rms": rms_diff(ref_qvel[:, 6:], before_qvel[:, 6:]),
             "root_lin_vel_change_rms": rms_diff(ref_qvel[:, :3], before_qvel[:, :3]), "reproduced": reproduced,
             "samples": n_samples}
    return rows, scale


def _qvel_of_states(m: mujoco.MjModel, d: mujoco.MjData, rows: np.ndarray) -> np.ndarray:
    out = np.empty((rows.shape[0], m.nv))
    for i, row in enumerate(rows):
        mujoco.mj_setState(m, d, row, _STATE)
        out[i] = d.qvel
    return out


def gate_under(checkpoint: str, setting: Setting, starts: int, horizon_s: float, seed: int,
               physics_threads: int):
    """The walking gate of ``checkpoint`` with its recorded config under ``setting``'s physics."""
    from isaac_adapter.evaluation.gate import GateConfig, gate_checkpoint

    cfg = GateConfig(starts=starts, horizon_s=horizon_s, seed=seed)
    return gate_checkpoint(checkpoint, cfg, physics_threads, physics=setting.config_overrides())


# -- the table -----------------------------------------------------------------------------------

_GATE_COLUMNS = (  # (gate line name, column header, format)
    ("falls (battery, all starts)", "falls", "{:.0f}"),
    ("tracking perf (battery)", "track", "{:.3f}"),
    ("leg action change RMS (units)", "act chg", "{:.3f}"),
    ("roll/pitch rate RMS (rad/s)", "roll/pitch", "{:.3f}"),
    ("yaw-rate error RMS (rad/s)", "yaw err", "{:.3f}"),
    ("leg joint velocity RMS (rad/s)", "leg qd", "{:.3f}"),
)


def format_table(rows: list[dict]) -> str:
    """Markdown table, one row per setting (a failing gate value is marked ``*``)."""
    headers = ["setting", "qd diff RMS", "qd diff p99", "v diff RMS", "iters", "at cap", "us/step",
               "cost"] + [h for _, h, _ in _GATE_COLUMNS] + ["gate"]
    ref_cost = rows[0]["us_per_env_step"]
    body = []
    for r in rows:
        cells = [r["label"], f"{r['joint_vel_rms_diff']:.4f}", f"{r['joint_vel_rms_diff_p99']:.4f}",
                 f"{r['root_lin_vel_rms_diff']:.5f}",
                 f"{r['solver_iter_mean']:.2f}/{r['solver_iterations']}", f"{100 * r['solver_at_cap_share']:.1f} %",
                 f"{r['us_per_env_step']:.0f}", f"{r['us_per_env_step'] / ref_cost:.2f}x"]
        gate = r.get("gate")
        if gate is None:
            cells += ["-"] * (len(_GATE_COLUMNS) + 1)
        else:
            lines = {line["name"]: line for line in gate["lines"]}
            for name, _, fmt in _GATE_COLUMNS:
                line = lines[name]
                cells.append(fmt.format(line["value"]) + ("" if line["passed"] else "*"))
            failed = sum(not line["passed"] for line in gate["lines"])
            cells.append("PASS" if gate["passed"] else f"FAIL ({failed})")
        body.append(cells)
    return _markdown(headers, body)


def spread(values: list[float], fmt: str) -> str:
    """``"mean (min..max)"`` of ``values`` in ``fmt``."""
    return f"{fmt.format(sum(values) / len(values))} ({fmt.format(min(values))}..{fmt.format(max(values))})"


def format_seed_table(rows: list[dict]) -> str:
    """Markdown table of each gate line as mean (min..max) over the gate seeds, one row per setting."""
    headers = ["setting"] + [h for _, h, _ in _GATE_COLUMNS] + ["passed"]
    body = []
    for r in rows:
        seeds = list(r["gate_seeds"].values())
        cells = [r["label"]]
        for name, _, fmt in _GATE_COLUMNS:
            cells.append(spread([x["lines"][name] for x in seeds], "{:.1f}" if fmt == "{:.0f}" else fmt))
        cells.append(f"{sum(x['passed'] for x in seeds)}/{len(seeds)}")
        body.append(cells)
    return _markdown(headers, body)


def _markdown(headers: list[str], body: list[list[str]]) -> str:
    widths = [max(len(h), *(len(c[i]) for c in body)) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        padded = (c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
        return "| " + " | ".join(padded) + " |"

    sep = "|" + "|".join(("-" * (w + 1) + ":") if i else ("-" * (w + 2)) for i, w in enumerate(widths)) + "|"
    return "\n".join([line(headers), sep, *(line(c) for c in body)])


@torch.no_grad()  # in-process callers (tests, other scripts) get their grad mode back
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default=CHECKPOINT, help="a G1-Walk Runner checkpoint")
    parser.add_argument("--settings", nargs="+", default=list(DEFAULT_SETTINGS),
                        help='physics settings, e.g. "dt=0.004,dec=5,it=3,ls=4" (it/ls absent: the file\'s)')
    parser.add_argument("--num-envs", type=int, default=16, help="envs of the reference walk (one-step states)")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of the reference walk")
    parser.add_argument("--command", type=float, nargs=3, default=(0.5, 0.0, 0.0), metavar=("VX", "VY", "WZ"))
    parser.add_argument("--gate-starts", type=int, default=None,
                        help="gate noisy starts per command (default: the gate's)")
    parser.add_argument("--gate-horizon-s", type=float, default=None, help="gate horizon (default: the gate's)")
    parser.add_argument("--no-gate", action="store_true", help="skip the closed-loop gate rollouts")
    parser.add_argument("--seed", type=int, default=0, help="seed of the reference walk")
    parser.add_argument("--gate-seeds", type=int, nargs="+", default=[0, 1, 2],
                        help="gate rollouts per setting; the first is the gate's verdict (main table), all of "
                             "them give the spread of each line (second table)")
    parser.add_argument("--physics-threads", type=int, default=0,
                        help="batch physics threads of the rollouts, 0: every core")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (see the module docstring)")
    parser.add_argument("--json", default=None, help="write every row here")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    start = time.perf_counter()

    from isaac_adapter.evaluation.gate import GateConfig
    from isaac_adapter.tasks.g1_walk import assets
    from isaac_adapter.tasks.registry import checkpoint_walk_config

    try:
        requested = [parse_setting(text) for text in args.settings]
    except ValueError as err:
        parser.error(str(err))
    recorded = checkpoint_walk_config(args.checkpoint, num_envs=1)
    ref = Setting(recorded.sim_dt, recorded.decimation, recorded.solver_iterations, recorded.ls_iterations,
                  solver=recorded.solver)
    file_model = assets.build_g1_model(recorded.model_variant, recorded.sim_dt).model
    file_options = (int(file_model.opt.iterations), int(file_model.opt.ls_iterations),
                   assets.option_name(mujoco.mjtSolver, file_model.opt.solver))
    settings, seen = [ref], {ref.resolved(*file_options)}
    for s in requested:
        if abs(s.policy_dt - ref.policy_dt) > 1e-9:
            parser.error(f"{s.label()}: policy step {s.policy_dt:g} s, the checkpoint's is {ref.policy_dt:g} s")
        if s.resolved(*file_options) not in seen:
            seen.add(s.resolved(*file_options))
            settings.append(s)

    gate_cfg = GateConfig(**{k: v for k, v in (("starts", args.gate_starts), ("horizon_s", args.gate_horizon_s))
                             if v is not None})
    print(f"{args.checkpoint} ({recorded.model_variant}, file solver: {file_options[2]}, iterations {file_options[0]}, "
          f"ls_iterations {file_options[1]}); reference physics: {ref.label()}")
    cpu = platform.processor() or platform.machine()
    print(f"CPU MuJoCo {mujoco.__version__}, {cpu}, torch threads {args.threads}")

    t0 = time.perf_counter()
    states = reference_states(args.checkpoint, ref, args.num_envs, args.seconds, tuple(args.command), args.seed,
                              args.physics_threads)
    reruns, scale = one_step_reruns(settings, states["model_variant"], states)
    one_step_s = time.perf_counter() - t0
    print(f"one-step states: {args.num_envs} envs x {states['steps']} policy steps ({args.seconds:g} s) at command "
          f"{tuple(args.command)}, {states['falls']} falls in the reference walk; {scale['samples']} states; "
          f"reference re-run reproduces the rollout bit for bit: {'yes' if scale['reproduced'] else 'NO'}")
    print(f"for scale: joint velocity RMS {scale['joint_vel_rms']:.3f} rad/s, its change over one policy step "
          f"RMS {scale['joint_vel_change_rms']:.3f} rad/s; root linear velocity change over one step RMS "
          f"{scale['root_lin_vel_change_rms']:.4f} m/s ({one_step_s:.1f} s)")

    rows = []
    for s, rerun in zip(settings, reruns):
        row = {"label": s.label(), "setting": s.config_overrides(), **rerun}
        if not args.no_gate:
            t0 = time.perf_counter()
            results = [gate_under(args.checkpoint, s, gate_cfg.starts, gate_cfg.horizon_s, seed, args.physics_threads)
                       for seed in args.gate_seeds]
            row["gate"] = results[0].as_dict()
            row["gate_seeds"] = {str(seed): {"passed": r.passed, "lines": {x.name: x.value for x in r.lines}}
                                 for seed, r in zip(args.gate_seeds, results)}
            row["gate_seconds"] = time.perf_counter() - t0
            verdicts = ", ".join(f"seed {seed} {'PASS' if r.passed else 'FAIL'}"
                                 for seed, r in zip(args.gate_seeds, results))
            print(f"gate under {s.label()}: {verdicts} ({row['gate_seconds']:.1f} s)")
        rows.append(row)

    print()
    print(format_table(rows))
    if not args.no_gate and len(args.gate_seeds) > 1:
        print()
        print(format_seed_table(rows))
    print()
    print("qd / v diff: RMS difference from the reference of the 29 joint velocities (rad/s) / root linear velocity "
          "(m/s, world) after one 20 ms policy step from the same state and targets; qd p99: 99th percentile over "
          "states of the per-state joint-velocity RMS difference.")
    print("iters: mean solver iterations per substep / the budget; at cap: substeps that used the whole budget. "
          "us/step: single-threaded CPU mj_step time per env per policy step (rough; GPU throughput is measured "
          "separately: benchmarks/env_gpu.py); cost: relative to the reference.")
    if not args.no_gate:
        print(f"gate: {len(gate_cfg.battery)} commands x {gate_cfg.starts} noisy starts x {gate_cfg.horizon_s:g} s, "
              f"the checkpoint's config with the row's physics; first table: seed {args.gate_seeds[0]} (the gate's "
              f"verdict), * marks a line that fails its limit"
              + (f"; second table: mean (min..max) over seeds {' '.join(map(str, args.gate_seeds))}."
                 if len(args.gate_seeds) > 1 else "."))
    wall = time.perf_counter() - start
    print(f"wall time {wall:.1f} s")
    if args.json:
        record = {"checkpoint": args.checkpoint, "command": list(args.command), "num_envs": args.num_envs,
                  "seconds": args.seconds, "seed": args.seed,
                  "gate_seeds": None if args.no_gate else args.gate_seeds, "reference": ref.config_overrides(),
                  "model_variant": recorded.model_variant, "file_solver": list(file_options),
                  "scale": scale, "falls_reference_walk": states["falls"], "rows": rows, "wall_s": wall,
                  "machine": {"mujoco": mujoco.__version__, "torch": torch.__version__,
                              "python": platform.python_version(), "torch_threads": args.threads},
                  "argv": sys.argv[1:] if argv is None else list(argv)}
        Path(args.json).write_text(json.dumps(record, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
