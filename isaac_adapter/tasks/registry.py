"""Task ids, as Isaac Lab and mjlab users know them, and the physics each one runs on.

=================================  ==================================================  ==========================
id                                 what                                                physics (``--sim``)
=================================  ==================================================  ==========================
``G1-Walk-Clock-v0``               the project's G1 velocity task with a gait clock    mujoco, warp, isaaclab
                                   (the recipe that walks; ``docs/checkpoints``)
``G1-Walk-v0``                     the same task without the clock (Isaac Lab's        mujoco, warp, isaaclab
                                   air-time recipe: learns to stand, not to step)
``G1-Walk-Clock-Ramp-v0``          the clock task, smoothness penalties ramped in      mujoco, warp, isaaclab
                                   after the gait is learnt (passes the walking gate;
                                   ``config.clock_ramp_config``)
``G1-Walk-Clock-Fast-v0``          the time-to-walk recipe: the clock task trained on  mujoco, warp, isaaclab
                                   10 ms x 2 physics, the ramps from iteration 250
                                   (``config.clock_fast_config``; judged at 5 ms x 4)
``G1-Walk-Clock-Fast-v1``          the same on 12-step iterations with twice the KL    mujoco, warp, isaaclab
                                   target: half the samples to the gate
                                   (``config.clock_fast_v1_config``; agent settings
                                   in ``TaskSpec.agent``)
``G1-Walk-Clock-Fast-v2``          v1 with the roll/pitch rate penalty ramped to       mujoco, warp, isaaclab
                                   twice its weight: the fastest to the gate
                                   (``config.clock_fast_v2_config``)
``G1-Walk-Clock-CPU-v0``           the recipe sized for a 2-core CPU (the default off  mujoco, warp
                                   a GPU): 1,024 envs, 256-128-64 networks, mirror
                                   loss, one KL decision per update
                                   (``config.clock_cpu_config``)
``G1-Walk-Clock-CPU-Gate-v0``      the CPU recipe trained on to the walking gate,       mujoco, warp
                                   ending with the gate's verdict
``G1-Walk-Robust-v0``              v2 with domain randomization at a G1 owner's        mujoco, warp, isaaclab
                                   ranges: friction, masses, gains, pushes, noise,
                                   delay (``config.robust_config``)
``G1-Walk-Robust-v1``              v0 kicked every 2-4 s, as the robustness gate       mujoco, warp, isaaclab
                                   kicks, with 3 observation frames and the mirror
                                   (``--symmetry both``): its recipe passed both
                                   gates at one training seed
                                   (``config.robust_v1_config``)
``G1-Walk-Smooth-v0``              the clock task with stronger smoothness penalties   mujoco, warp, isaaclab
                                   from the start (``config.smooth_gait_config``; in
                                   the runs measured, learnt to stand, not to walk)
``Isaac-Velocity-Flat-G1``         Isaac Lab's own task on the local 29-joint G1       isaaclab
``Isaac-Velocity-Rough-G1``        the same on generated rough terrain                 isaaclab
``Mjlab-Velocity-Flat-Unitree-G1`` mjlab's G1 velocity task                            mjlab
=================================  ==================================================  ==========================

``sim="auto"`` picks MuJoCo Warp on the GPU when CUDA and Warp are there, else MuJoCo on the CPU
(Isaac Lab's and mjlab's tasks: their own simulator). :mod:`isaac_adapter.app.envs` builds the
envs (this floor names tasks and their configs and imports no simulator); its ``check_sim`` says in
one line what to install when a simulator is missing, before anything is built.
"""

from __future__ import annotations

import difflib
import importlib.util
from dataclasses import dataclass, replace
from typing import Any

SIMS = ("mujoco", "warp", "isaaclab", "mjlab")


class UsageError(ValueError):
    """A request that cannot run here; the message is one line that names the fix."""


@dataclass(frozen=True)
class TaskSpec:
    """One registered task.

    Attributes:
        id: the task id (``--task``).
        description: one line for listings.
        sims: the physics it runs on; the first that is installed is the default off a GPU.
        gait_clock: for the project's G1 task: whether the gait-clock variant (None for others).
        preset: for the project's G1 task: its key in ``config.PRESETS``, when not the one
            ``gait_clock`` names (``"gait_clock"`` or ``"default"``).
        agent: the task's own learner settings, as ``agent.*`` overrides (Isaac Lab's per-task
            agent config): applied before the command line's flags and overrides, which win.
        num_envs, max_iterations: the task's own env count and iterations (Isaac Lab's
            ``scene.num_envs`` and agent ``max_iterations``); None takes the device's defaults.
        symmetry: the task's ``--symmetry`` when the command line gives none.
        closing_gate: training ends with the walking gate (``benchmarks/g1_gate.py``) on the last
            checkpoint, after the gait acceptance.
    """

    id: str
    description: str
    sims: tuple[str, ...]
    gait_clock: bool | None = None
    preset: str | None = None
    agent: tuple[str, ...] = ()
    num_envs: int | None = None
    max_iterations: int | None = None
    symmetry: str = "off"
    closing_gate: bool = False

    @property
    def is_g1_walk(self) -> bool:
        """The project's own task (its config, evaluator and checkpoints), on any of its sims."""
        return self.gait_clock is not None

    @property
    def config_preset(self) -> str | None:
        """The G1 task's preset (``config.PRESETS`` key); None for the other tasks."""
        if not self.is_g1_walk:
            return None
        return self.preset or ("gait_clock" if self.gait_clock else "default")


#: The learner settings of ``G1-Walk-Clock-Fast-v1`` and ``-v2``: 12-step iterations (half the
#: samples of the others') with twice the KL target.
FAST_AGENT = ("agent.num_steps_per_env=12", "agent.ppo.desired_kl=0.02")

#: The learner settings of ``G1-Walk-Clock-CPU-v0``: the fast recipe's, with networks of a quarter of
#: the cost of 512-256-128 (the update is most of a CPU iteration) and the KL schedule deciding once
#: per update (``PPOConfig.adaptive_every``): per mini-batch, none of four runs at 512-1,024 envs met
#: the stepping criteria within 7-12M samples (BENCHMARKS.md, "Time to walk on a 2-core CPU"). The
#: update takes every core torch sees (``torch_threads=0``, torch's own setting): MuJoCo's batch step
#: and the update never run at once, and on 2 cores the update took about half the time of the
#: Runner's default of half the cores (BENCHMARKS.md, same section).
CPU_THREADS = "agent.torch_threads=0"  # how fast it runs, not what it learns
#: The CPU recipe's length: three seeds passed the gait acceptance at iterations 550-700 on 2 cores,
#: and 750 ends within 30 min there, its closing evaluation and clip included (BENCHMARKS.md, "Time
#: to walk on a 2-core CPU"); the walking gate wants longer runs (``G1-Walk-Clock-CPU-Gate-v0``)
CPU_RECIPE_ITERATIONS = 750
#: The same recipe trained on to the walking gate: on 2 cores seeds 0-2 passed it at iterations
#: 1,000-1,350 and at 1,400, about 45 min from launch there (BENCHMARKS.md, "Time to walk on a 2-core CPU")
CPU_GATE_ITERATIONS = 1400
CPU_AGENT = (*FAST_AGENT, "agent.ppo.adaptive_every=update", "agent.policy.actor_hidden=[256,128,64]",
             "agent.policy.critic_hidden=[256,128,64]", CPU_THREADS)

_CPU_RECIPE = TaskSpec(
    "G1-Walk-Clock-CPU-v0", "the time-to-walk recipe sized for a 2-core CPU: 1,024 envs, small networks, the mirror "
    "loss, one KL decision per update, twice the gait clock's contact reward", ("mujoco", "warp"), True, "clock_cpu",
    CPU_AGENT, num_envs=1024, max_iterations=CPU_RECIPE_ITERATIONS, symmetry="loss")

TASKS: dict[str, TaskSpec] = {
    spec.id: spec
    for spec in (
        TaskSpec("G1-Walk-Clock-v0", "G1 velocity walking with a 0.8 s gait clock (walks)", ("mujoco", "warp", "isaaclab"), True),
        TaskSpec("G1-Walk-v0", "G1 velocity walking, Isaac Lab's air-time recipe, no clock", ("mujoco", "warp", "isaaclab"), False),
        TaskSpec("G1-Walk-Clock-Ramp-v0", "G1 velocity walking with the gait clock, smoothness penalties ramped in "
                 "after the gait (passes the gate)", ("mujoco", "warp", "isaaclab"), True, "clock_ramp"),
        TaskSpec("G1-Walk-Clock-Fast-v0", "G1 velocity walking with the gait clock on 10 ms x 2 physics, smoothness "
                 "ramped in from iteration 250 (the time-to-walk recipe)", ("mujoco", "warp", "isaaclab"), True, "clock_fast"),
        TaskSpec("G1-Walk-Clock-Fast-v1", "the time-to-walk recipe on 12-step iterations with twice the KL target "
                 "(half the samples to the gate)", ("mujoco", "warp", "isaaclab"), True, "clock_fast_v1", FAST_AGENT),
        TaskSpec("G1-Walk-Clock-Fast-v2", "G1-Walk-Clock-Fast-v1 with the roll/pitch rate penalty ramped to twice "
                 "its weight (the fastest to the gate)", ("mujoco", "warp", "isaaclab"), True, "clock_fast_v2",
                 FAST_AGENT),
        _CPU_RECIPE,
        replace(_CPU_RECIPE, id="G1-Walk-Clock-CPU-Gate-v0", description="G1-Walk-Clock-CPU-v0 trained on to the "
                "walking gate, which judges its last checkpoint", max_iterations=CPU_GATE_ITERATIONS, closing_gate=True),
        TaskSpec("G1-Walk-Robust-v0", "G1-Walk-Clock-Fast-v2 with domain randomization: foot friction, link masses, "
                 "base CoM, joint and PD parameters, pushes, observation noise, action delay", ("mujoco", "warp", "isaaclab"), True,
                 "robust", FAST_AGENT),
        TaskSpec("G1-Walk-Robust-v1", "G1-Walk-Robust-v0 kicked every 2-4 s, as the robustness gate kicks, with "
                 "3 observation frames, the mirror (its recipe passed both gates at one training seed)", ("mujoco", "warp", "isaaclab"), True, "robust_v1",
                 FAST_AGENT, symmetry="both"),
        TaskSpec("G1-Walk-Smooth-v0", "G1 velocity walking with the gait clock and stronger smoothness penalties",
                 ("mujoco", "warp", "isaaclab"), True, "smooth_gait"),
        TaskSpec("Isaac-Velocity-Flat-G1", "Isaac Lab's G1 velocity task, flat ground", ("isaaclab",)),
        TaskSpec("Isaac-Velocity-Rough-G1", "Isaac Lab's G1 velocity task, rough terrain", ("isaaclab",)),
        TaskSpec("Mjlab-Velocity-Flat-Unitree-G1", "mjlab's G1 velocity task, flat ground", ("mjlab",)),
    )
}
DEFAULT_TASK = "G1-Walk-Clock-v0"
#: What a run without ``--task`` trains off a GPU (README: the main command on a 2-core CPU).
DEFAULT_CPU_TASK = "G1-Walk-Clock-CPU-v0"


def default_task(sim: str = "auto", device: str = "auto") -> str:
    """The task of a run without ``--task``: :data:`DEFAULT_CPU_TASK` where the physics runs on the
    CPU (``--sim mujoco``, ``--device cpu``, or no CUDA device), else :data:`DEFAULT_TASK`."""
    on_cpu = sim == "mujoco" or device == "cpu" or (device == "auto" and sim == "auto" and not _cuda())
    return DEFAULT_CPU_TASK if on_cpu else DEFAULT_TASK


#: Names that moved to :mod:`isaac_adapter.app.envs` with the building of envs; the older import
#: path still finds them (imported when first asked for, so that this module imports no simulator).
_MOVED_TO_APP = ("make_env", "check_sim", "env_params")


def __getattr__(name: str) -> Any:
    if name in _MOVED_TO_APP:
        from isaac_adapter.app import envs

        return getattr(envs, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_task(task_id: str) -> TaskSpec:
    """The spec of ``task_id``; a :class:`UsageError` naming the known ids (and the closest) otherwise."""
    if task_id in TASKS:
        return TASKS[task_id]
    close = difflib.get_close_matches(task_id, TASKS, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    raise UsageError(f"unknown task {task_id!r}{hint}; registered: {', '.join(TASKS)}")


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def resolve(spec: TaskSpec, sim: str = "auto", device: str = "auto") -> tuple[str, str]:
    """``(sim, device)`` for ``spec``: ``auto`` picks MuJoCo Warp on ``cuda`` when both are there,
    else MuJoCo on the CPU; the other tasks take their own simulator, on ``cuda`` when there is one."""
    if device == "auto":
        device = "cuda" if _cuda() else "cpu"
    if device.startswith("cuda") and not _cuda():
        raise UsageError("--device cuda but torch sees no CUDA device here; use --device cpu (or auto)")
    if sim == "auto":
        if spec.is_g1_walk:
            sim = "warp" if device.startswith("cuda") and _installed("mujoco_warp") else "mujoco"
        else:
            sim = spec.sims[0]
    if sim not in spec.sims:
        raise UsageError(f"{spec.id} runs on --sim {' or '.join(spec.sims)}, not {sim}")
    if sim == "mujoco":
        device = "cpu"  # the CPU backend; the policy follows the env
    return sim, device


def checkpoint_walk_config(path: str, gait_clock: bool | None = None, randomized: bool = False,
                           **overrides: Any) -> Any:
    """The :class:`~isaac_adapter.tasks.g1_walk.config.G1WalkConfig` to evaluate the G1-Walk checkpoint
    at ``path`` on: the task it recorded (every field but ``num_envs``, ``device``, ``seed`` and
    ``physics_threads``), its task variant's preset for what it did not record, and ``overrides``
    over both (see ``config.stored_config``).

    Evaluation judges a policy in the nominal world: without the domain randomization it trained
    under (drawn physics, pushes, observation noise, action delay), as the walking gate does; the
    robustness gate brings its own. ``randomized`` keeps the recorded randomization (play shows the
    world the policy trained in).

    A checkpoint that recorded no config (older files) gets the command settings of that time,
    ``config.LEGACY_COMMANDS``, so that its published mixed-command figures stay reproducible.
    ``gait_clock`` asks for the other variant: the recorded clock and reward weights are then dropped.
    """
    from ppo_bootstrap import checkpoint

    from isaac_adapter.tasks.g1_walk.config import stored_config
    from isaac_adapter.tasks.g1_walk.randomization import RandomizationCfg

    spec, params = checkpoint_task(checkpoint.read(path), path)
    if not spec.is_g1_walk:
        raise UsageError(f"{path} was trained on {spec.id}, not on a G1-Walk task")
    preset = spec.config_preset
    if gait_clock is not None and gait_clock != spec.gait_clock:
        preset = "gait_clock" if gait_clock else "default"
        params = {k: v for k, v in params.items() if k not in ("gait_period_s", "rewards")}
    if not randomized:
        overrides.setdefault("randomization", RandomizationCfg())  # all off; an override still wins
    return stored_config(params, preset, **overrides)


def checkpoint_task(ckpt: dict[str, Any], path: str = "the checkpoint") -> tuple[TaskSpec, dict[str, Any]]:
    """The task a checkpoint was trained on, and its env configuration.

    Checkpoints written since the registry exists record ``{"task": {"id", "env"}}``; for older files
    of the project's G1 task the policy's input width tells the variant (96: no clock, 98: the
    clock's sin and cos on top).

    Raises:
        UsageError: neither tells (one line naming the file and the ``--task`` flag).
    """
    task = ckpt.get("task") or {}
    if task.get("id"):
        return get_task(task["id"]), dict(task.get("env") or {})
    weight = next((v for k, v in ckpt.get("policy", {}).items() if k.startswith("actor.") and k.endswith("weight")), None)
    width = weight.shape[1] if weight is not None and weight.dim() == 2 else None
    if width in (96, 98):
        return TASKS["G1-Walk-Clock-v0" if width == 98 else "G1-Walk-v0"], {}
    raise UsageError(f"{path} does not record its task and its policy input ({width}) is no G1-Walk layout; pass --task")
