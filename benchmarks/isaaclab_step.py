"""Where an Isaac Lab env step of the G1 task spends its time: Isaac Lab alone, the adapter, the policy.

    python benchmarks/isaaclab_step.py --task G1-Walk-Clock-Fast-v2 --num-envs 4096 --device cuda:0 --json out.json
    python benchmarks/isaaclab_step.py --num-envs 4096 --graph-step --json out.json
    python benchmarks/isaaclab_step.py --task G1-Walk-Robust-v0 --num-envs 4096 --graph-step --json out.json
    python benchmarks/isaaclab_step.py --table out_4096.json out_16384.json

One process builds one env (Isaac Lab allows one simulation per process), then measures, each over
``--steps`` steps after ``--warmup`` untimed ones, with random actions N(0, 0.5):

``--reset-by-ids`` measures Isaac Lab's own reset path (``reset_buf.nonzero()``) instead of the
env's reset by mask (:mod:`isaac_adapter.isaaclab.g1_direct`).

* ``isaaclab``: ``G1WalkDirectEnv.step`` as Isaac Lab calls it (what Isaac Lab itself costs with this
  task's terms; the floor for anything built on it);
* ``adapter``: the same through :class:`~isaac_adapter.adapters.isaaclab.IsaacLabVecEnv` with the
  protocol checks off (``validate_env_output=False``, as a trusted GPU run trains);
* ``adapter+checks``: with the Runner's per-step protocol checks (``validate_step``) on;
* ``adapter+policy``: the collection loop's inner step: the policy's forward pass (the task's default
  network, normalizer included) and the adapter step;
* with ``--graph-step``, the same rows with the step recorded once in a CUDA graph and replayed
  (``G1WalkDirectEnv.cuda_graph``, Newton's physics inside it), and a check that the replayed
  step behaves as the eager one: mean reward and episode ends per step over ``--steps`` steps
  each (random actions; not bitwise, the random streams differ); for a task that draws physical
  parameters at its resets (``G1-Walk-Robust-v0``), whether after the replays the ended envs drew
  again, the others kept their draws, and every draw is in Newton's model and the solver's;
* a phase table: one more pass in which every phase of the step is bracketed by device
  synchronisations (so the phases add up to more than the unbracketed step), with the host
  synchronisations torch reports inside each phase (``torch.cuda.set_sync_debug_mode("warn")``).

Every timed row synchronises the device once at its start and once at its end only.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import traceback
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

import _common  # noqa: F401  (puts the repository root on sys.path)
from _common import add_solver_args, solver_overrides
import torch

# the phases of one step, in the order DirectRLEnv.step runs them (methods of the env instance)
PHASES = (
    ("_pre_physics_step", "actions -> joint targets (task)"),
    ("_apply_action", "targets -> drives (per physics call)"),
    ("physics", "sim.step + scene.write/update (Newton / MuJoCo-Warp)"),
    ("_get_dones", "robot state read + fall rules (task)"),
    ("_get_rewards", "reward terms (task)"),
    ("_reset_envs_from_buffer", "Isaac Lab's reset hook (reset_buf.nonzero on the id path)"),
    ("final_obs", "observations before the reset (compute_final_obs)"),
    ("_reset_idx", "selective reset (scene + task)"),
    ("_compute_observations", "observations after the step (task)"),
)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class PhaseTimer:
    """Exclusive wall time and host syncs per phase, each phase bracketed by device syncs."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.time: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.syncs: dict[str, int] = defaultdict(int)
        self.stack: list[list[Any]] = []  # [name, start, child seconds]
        self.on = False

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            if not self.on:
                return fn(*args, **kwargs)
            sync(self.device)
            self.stack.append([name, time.perf_counter(), 0.0])
            try:
                return fn(*args, **kwargs)
            finally:
                sync(self.device)
                _, start, child = self.stack.pop()
                spent = time.perf_counter() - start
                self.time[name] += spent - child
                self.calls[name] += 1
                if self.stack:
                    self.stack[-1][2] += spent

        return timed

    def count_sync(self) -> None:
        self.syncs[self.stack[-1][0] if self.stack else "outside the env"] += 1


def instrument(base: Any, timer: PhaseTimer) -> None:
    """Wrap the env instance's step phases (instance attributes, found before the class's methods)."""
    for name in ("_pre_physics_step", "_apply_action", "_get_dones", "_get_rewards", "_reset_envs_from_buffer",
                 "_reset_idx"):
        setattr(base, name, timer.wrap(name, getattr(base, name)))
    compute = base._compute_observations
    final = timer.wrap("final_obs", compute)
    after = timer.wrap("_compute_observations", compute)
    # Isaac Lab calls _compute_observations inside _reset_envs_from_buffer for the final observation
    base._compute_observations = lambda: (final() if timer.stack and timer.stack[-1][0] == "_reset_envs_from_buffer"
                                          else after())
    for owner, name in ((base.sim, "step"), (base.scene, "write_data_to_sim"), (base.scene, "update")):
        setattr(owner, name, timer.wrap("physics", getattr(owner, name)))


def print_sync_sites(base: Any, random_actions: Callable[[], torch.Tensor], device: torch.device) -> None:
    """Print where one eager step synchronises the host with the GPU (torch's sync debug mode), each
    site once: what a recorded step cannot contain."""
    sites: dict[str, int] = defaultdict(int)

    def note(message: Any, *_: Any, **__: Any) -> None:
        if "synchroniz" in str(message):
            frames = [f for f in traceback.extract_stack()[:-1] if "warnings" not in f.filename][-6:]
            sites["\n    ".join(f"{f.filename.split('site-packages/')[-1]}:{f.lineno} {f.name}" for f in frames)] += 1

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = note
        torch.cuda.set_sync_debug_mode("warn")
        try:
            base.step(random_actions())
        finally:
            torch.cuda.set_sync_debug_mode(0)
    print(f"host syncs in one eager step: {sum(sites.values())}", flush=True)
    for where, count in sites.items():
        print(f"  {count}x\n    {where}", flush=True)


def timed_steps(step: Callable[[], Any], steps: int, warmup: int, device: torch.device) -> float:
    """Seconds per step over ``steps`` calls after ``warmup`` untimed ones."""
    for _ in range(warmup):
        step()
    sync(device)
    start = time.perf_counter()
    for _ in range(steps):
        step()
    sync(device)
    return (time.perf_counter() - start) / steps


def measure(args: argparse.Namespace) -> dict[str, Any]:
    from isaac_adapter.tasks import registry
    from ppo_bootstrap import CRITIC, POLICY, ActorCritic, PolicyConfig
    from ppo_bootstrap.episode import validate_step

    from isaac_adapter.app.bench.isaaclab_draws import DRAW_CHECK_STEPS, draws_after_replays
    from isaac_adapter.isaaclab.g1_direct import make_g1_direct_env
    from isaac_adapter.tasks.g1_walk.config import walk_config

    t0 = time.perf_counter()
    spec = registry.get_task(args.task)
    if not spec.is_g1_walk:
        sys.exit(f"error: --task {args.task} is not one of the project's G1 walking tasks")
    task = walk_config(preset=spec.config_preset, num_envs=args.num_envs, seed=args.seed, device=args.device,
                       **solver_overrides(args))
    env = make_g1_direct_env(task, reset_by_mask=not args.reset_by_ids)
    build_s = time.perf_counter() - t0
    base, device = env.unwrapped, env.device
    n, a = env.num_envs, env.num_actions
    gen = torch.Generator(device=device).manual_seed(args.seed)

    def random_actions() -> torch.Tensor:
        return 0.5 * torch.randn(n, a, device=device, generator=gen)

    obs = env.reset()
    t1 = time.perf_counter()
    base.step(random_actions())  # first step: kernel compile and Newton's graph capture
    sync(device)
    first_step_s = time.perf_counter() - t1

    rows: list[dict[str, Any]] = []

    def row(name: str, seconds: float) -> None:
        rows.append({"what": name, "ms_per_step": 1e3 * seconds, "env_steps_per_s": n / seconds})
        print(f"  {name:<16} {1e3 * seconds:8.2f} ms/step {n / seconds:12,.0f} env-steps/s", flush=True)

    row("isaaclab", timed_steps(lambda: base.step(random_actions()), args.steps, args.warmup, device))
    row("adapter", timed_steps(lambda: env.step(random_actions()), args.steps, args.warmup, device))

    def checked_step() -> None:
        validate_step(n, env.step(random_actions()), None, device)

    row("adapter+checks", timed_steps(checked_step, args.steps, args.warmup, device))

    obs = env.reset()
    groups = {"policy": obs[POLICY], "critic": obs.get(CRITIC, obs[POLICY])}
    policy = ActorCritic(groups["policy"].shape[-1], groups["critic"].shape[-1], a, PolicyConfig()).to(device)
    state = {"obs": obs}

    @torch.no_grad()
    def policy_step() -> None:
        dist, _ = policy.act(state["obs"][POLICY], None)
        state["obs"] = env.step(dist.sample()).obs

    row("adapter+policy", timed_steps(policy_step, args.steps, args.warmup, device))

    behaviour: dict[str, Any] = {}
    draws: dict[str, bool] = {}
    if args.graph_step:
        def stats(graph: bool) -> dict[str, float]:
            """Mean reward and episode ends per step over --steps steps (device sums, one read)."""
            base.cuda_graph = graph
            reward = torch.zeros((), device=device)
            ends = torch.zeros((), device=device)
            for _ in range(args.steps):
                _, r, terminated, time_outs, _ = base.step(random_actions())
                reward += r.mean()
                ends += (terminated | time_outs).sum()
            return {"mean_reward": reward.item() / args.steps, "ends_per_step": ends.item() / args.steps}

        behaviour["eager"] = stats(False)
        try:
            behaviour["graph"] = stats(True)
        except Exception as err:  # what stopped the recording, and where a plain step waits on the GPU
            base.cuda_graph = False
            print(f"graph step failed: {type(err).__name__}: {err}", flush=True)
            traceback.print_exc(limit=-12)
            print_sync_sites(base, random_actions, device)
            raise SystemExit(3)
        if base.physics_params:  # the task draws physical parameters at its resets: where do a replay's go?
            before = {name: value.clone() for name, value in base.physics_params.items()}
            ended = torch.zeros(n, dtype=torch.bool, device=device)
            for _ in range(DRAW_CHECK_STEPS):
                _, _, terminated, time_outs, _ = base.step(random_actions())
                ended |= terminated | time_outs
            draws = draws_after_replays(base, before, ended)
        base.cuda_graph = True
        row("isaaclab graph", timed_steps(lambda: base.step(random_actions()), args.steps, args.warmup, device))
        row("adapter graph", timed_steps(lambda: env.step(random_actions()), args.steps, args.warmup, device))
        state["obs"] = env.reset()
        row("adapter+policy graph", timed_steps(policy_step, args.steps, args.warmup, device))
        base.cuda_graph = False
        print(f"  behaviour per step: eager {behaviour['eager']}, graph {behaviour['graph']}", flush=True)

    # the phase table: every phase bracketed by device syncs, host syncs counted per phase
    timer = PhaseTimer(device)
    instrument(base, timer)
    steps = max(args.steps // 2, 1)
    for _ in range(args.warmup):
        base.step(random_actions())
    timer.on = True
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        # torch reports each host sync as a warning while the debug mode is "warn": count them per phase
        warnings.showwarning = lambda message, *_, **__: timer.count_sync() if "synchroniz" in str(message) else None
        if device.type == "cuda":
            torch.cuda.set_sync_debug_mode("warn")
        try:
            for _ in range(steps):
                base.step(random_actions())
        finally:
            if device.type == "cuda":
                torch.cuda.set_sync_debug_mode(0)
    timer.on = False
    phases = []
    for name, what in PHASES:
        phases.append({"phase": name, "what": what, "ms_per_step": 1e3 * timer.time.get(name, 0.0) / steps,
                       "calls_per_step": timer.calls.get(name, 0) / steps,
                       "syncs_per_step": timer.syncs.get(name, 0) / steps})
    ends = base.reset_buf.float().mean().item()
    solver_cfg = base.cfg.sim.physics.solver_cfg
    return {"task": args.task, "num_envs": n, "reset": "ids" if args.reset_by_ids else "mask", "device": str(device),
            "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "build_s": build_s, "first_step_s": first_step_s, "steps": args.steps, "rows": rows, "behaviour": behaviour,
            "draws": draws,
            "phases": phases, "phase_steps": steps, "ended_fraction_last_step": ends,
            "solver": {"iterations": solver_cfg.iterations, "ls_iterations": solver_cfg.ls_iterations,
                       "tolerance": solver_cfg.tolerance}}


def print_table(result: dict[str, Any]) -> None:
    from _common import format_table

    print(f"\n{result['task']} on Isaac Lab, {result['num_envs']} envs, reset by {result.get('reset', 'ids')}, "
          f"{result['gpu']}: build {result['build_s']:.1f} s, "
          f"first step {result['first_step_s']:.1f} s, {result['steps']} timed steps")
    if "solver" in result:
        sv = result["solver"]
        print(f"solver: {sv['iterations']} iterations, {sv['ls_iterations']} line-search steps, tolerance {sv['tolerance']:g}")
    print(format_table(["step", "ms/step", "env-steps/s"],
                       [[r["what"], f"{r['ms_per_step']:.2f}", f"{r['env_steps_per_s']:,.0f}"] for r in result["rows"]]))
    for mode, b in result.get("behaviour", {}).items():
        print(f"{mode}: mean reward {b['mean_reward']:.4f} per step, {b['ends_per_step']:.2f} episode ends per step")
    if result.get("draws"):
        print("\nthe physical draws after the recorded step's replays:")
        print(format_table(["check", "holds"], [[what, "yes" if ok else "NO"] for what, ok in result["draws"].items()], left=1))
    total = sum(p["ms_per_step"] for p in result["phases"])
    print(f"\nphases, each bracketed by device syncs ({result['phase_steps']} steps; sum {total:.2f} ms/step):")
    print(format_table(["phase", "ms/step", "share", "calls/step", "host syncs/step", "what"],
                       [[p["phase"], f"{p['ms_per_step']:.2f}", f"{100 * p['ms_per_step'] / max(total, 1e-12):.0f} %",
                         f"{p['calls_per_step']:.0f}", f"{p['syncs_per_step']:.1f}", p["what"]] for p in result["phases"]],
                       left=1))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", default="G1-Walk-Clock-Fast-v2")
    p.add_argument("--num-envs", type=int, default=4096)
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--reset-by-ids", action="store_true",
                   help="Isaac Lab's own reset path (reset_buf.nonzero, compute_final_obs) instead of the mask")
    p.add_argument("--graph-step", action="store_true",
                   help="also time the step recorded in one CUDA graph and replayed (G1WalkDirectEnv.cuda_graph)")
    add_solver_args(p)
    p.add_argument("--json", default=None, help="write the result here")
    p.add_argument("--table", nargs="+", default=None, metavar="JSON", help="print saved results instead")
    args = p.parse_args()
    if args.table:
        for path in args.table:
            print_table(json.loads(Path(path).read_text()))
        return
    if args.num_envs <= 0 or args.steps <= 0 or args.warmup < 0:
        sys.exit("error: --num-envs and --steps must be positive, --warmup >= 0")
    if args.graph_step and (args.reset_by_ids or not args.device.startswith("cuda")):
        sys.exit("error: --graph-step records the step on CUDA with the reset by mask; drop --reset-by-ids, use --device cuda")
    solver_overrides(args)  # checked before anything is built
    from isaac_adapter.tasks import registry

    try:
        registry.check_sim("isaaclab")
    except registry.UsageError as err:
        sys.exit(f"error: {err}")
    result = measure(args)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    print_table(result)


if __name__ == "__main__":
    main()
