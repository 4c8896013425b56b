"""Tensor operations per env step of G1 training, by the hook or the Runner part that issues them.

    python benchmarks/step_ops.py                                  # G1-Walk-Clock-Fast-v0, 16 envs, CPU MuJoCo
    python benchmarks/step_ops.py --task G1-Walk-Clock-v0 --steps 48

On a GPU each tensor operation is at least one kernel launch and one pass through the Python and
torch dispatcher (about 10 us on the H200 host), however few envs it covers: at 4,096 envs the
G1 task's step is bound by their number, not by its arithmetic (BENCHMARKS.md, "Where a policy
step's time goes"). The count does not depend on the number of envs or on the device, so it is
measured here on CPU MuJoCo, in seconds, and tells whether a change to the task terms cut launches
before any GPU run. Counted: every aten call that computes something; views (``view``, ``select``,
``unsqueeze``...) and casts or reshapes that return their input's storage are not counted. The
physics itself (a MuJoCo step here, Warp launches on the GPU) is not a torch operation and is not
in the count.

Prints one table: operations per env step for each hook of the task's step (in
``G1WalkEnv.step``'s order) and for the Runner's other parts of a rollout step (the policy's
``act``, the storage's ``process_env_step``, the Runner's own bookkeeping), averaged over
``--steps`` steps of a Runner rollout after a warm-up rollout.
"""

from __future__ import annotations

import argparse
import collections
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ppo_bootstrap import PolicyConfig, PPOConfig, Runner, RunnerConfig

from isaac_adapter.app import envs
from isaac_adapter.app.bench.common import format_table, machine_line
from isaac_adapter.tasks import registry
from isaac_adapter.tasks.g1_walk.config import walk_config

# the task's hooks in the order G1WalkEnv.step calls them (two calls of _get_observations)
TASK_HOOKS = ("_pre_physics_step", "_apply_action", "_get_dones", "_get_rewards", "_get_observations",
              "_step_log", "_record_episode_end", "_reset_idx", "_last_episode_log")
OTHER = "(rest of env.step)"


def computes(func: Any, args: tuple, out: Any) -> bool:
    """Whether the aten call ``func(*args) -> out`` computes something (launches a kernel on a GPU):
    not a view, and not a non-mutating call that handed back its input's storage (a cast to the
    dtype it has, a reshape that could view)."""
    if func.is_view:
        return False
    if func._schema.is_mutable or not isinstance(out, torch.Tensor) or not args:
        return True
    first = args[0]
    if not isinstance(first, torch.Tensor) or first.device.type == "meta":
        return True
    return out.untyped_storage().data_ptr() != first.untyped_storage().data_ptr()


class OpCounter(TorchDispatchMode):
    """Counts computing aten calls by the innermost open label (:meth:`label` wraps a callable)."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: collections.Counter[str] = collections.Counter()
        self.stack: list[str] = ["(Runner bookkeeping)"]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        out = func(*args, **(kwargs or {}))
        if computes(func, args, out):
            self.counts[self.stack[-1]] += 1
        return out

    def label(self, owner: Any, attr: str, name: str) -> None:
        """Count what ``owner.attr(...)`` issues under ``name`` (an instance attribute shadows the method)."""
        inner: Callable[..., Any] = getattr(owner, attr)

        def labelled(*args: Any, **kwargs: Any) -> Any:
            self.stack.append(name)
            try:
                return inner(*args, **kwargs)
            finally:
                self.stack.pop()

        setattr(owner, attr, labelled)


def measure(task: str, num_envs: int, steps: int, symmetry: bool) -> list[tuple[str, float]]:
    try:
        spec = registry.get_task(task)
    except registry.UsageError as err:
        raise SystemExit(f"--task: {err}") from None
    if not spec.is_g1_walk:
        raise SystemExit(f"--task {task}: this count is for the G1-Walk tasks")
    env = envs.make_env(spec, "mujoco", "cpu", num_envs, seed=0, config=walk_config(preset=spec.config_preset))
    env.validate_actions = False  # as training with --no-validate
    cfg = RunnerConfig(num_steps_per_env=steps, save_interval=0, log_dir=None, validate_env_output=False,
                       console=False,
                       ppo=PPOConfig(timeout_bootstrap="exact", symmetry_augmentation=symmetry,
                                     symmetry_loss_coef=1.0 if symmetry else 0.0),
                       policy=PolicyConfig(actor_hidden=(512, 256, 128), critic_hidden=(512, 256, 128)))
    runner = Runner(env, cfg, device="cpu")
    runner._collect()  # warm-up: first-call set-up is not a per-step cost
    counter = OpCounter()
    counter.label(env, "step", OTHER)
    for hook in TASK_HOOKS:
        counter.label(env, hook, hook)
    counter.label(runner.alg, "act", "policy act")
    counter.label(runner.alg, "process_env_step", "storage process_env_step")
    with torch.inference_mode(), counter:
        runner._collect()
    # the per-rollout work (one stack and one read of the ended episodes) is spread over its steps
    rows = [(name, counter.counts[name] / steps) for name in (*TASK_HOOKS, OTHER)]
    rows += [(name, counter.counts[name] / steps) for name in ("policy act", "storage process_env_step",
                                                                 "(Runner bookkeeping)")]
    return rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="G1-Walk-Clock-Fast-v0")
    p.add_argument("--num-envs", type=int, default=16, help="the count does not depend on it")
    p.add_argument("--steps", type=int, default=24, help="steps of the counted rollout")
    p.add_argument("--no-symmetry", action="store_true", help="the policy without the mirror (no change to act)")
    args = p.parse_args(argv)
    torch.manual_seed(0)
    rows = measure(args.task, args.num_envs, args.steps, symmetry=not args.no_symmetry)
    task_total = sum(v for name, v in rows if name in TASK_HOOKS or name == OTHER)
    total = sum(v for _, v in rows)
    print(machine_line(torch.device("cpu")))
    print(f"task {args.task}, {args.num_envs} envs on CPU MuJoCo, {args.steps} rollout steps counted")
    table = [[name, f"{v:.1f}", f"{100 * v / total:.0f} %"] for name, v in rows]
    table += [["env.step (the task)", f"{task_total:.1f}", f"{100 * task_total / total:.0f} %"],
              ["all, per env step", f"{total:.1f}", "100 %"]]
    print(format_table(["part", "ops per env step", "share"], table))


if __name__ == "__main__":
    main()
