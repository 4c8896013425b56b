"""``train``: a registered task on the simulator asked for, into an Isaac Lab style run folder.

Everything that can be refused is refused before the env is built: the flags (:mod:`.args`), the
checkpoint to resume, the task and simulator, the overrides and the run folder.
"""

from __future__ import annotations

import dataclasses
import importlib
import shlex
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ppo_bootstrap import PolicyConfig, PPOConfig, Runner, RunnerConfig, checkpoint, distributed

from isaac_adapter.app import STARTED, envs
from isaac_adapter.app.args import CPU_ENVS, CPU_ITERATIONS, GPU_ENVS, GPU_ITERATIONS, Args
from isaac_adapter.app.overrides import apply_overrides
from isaac_adapter.app.run_dir import find_checkpoint, lock_run_dir, new_run_dir, write_git_state, write_params
from isaac_adapter.tasks import registry
from isaac_adapter.tasks.registry import UsageError

if TYPE_CHECKING:
    from isaac_adapter.tasks.g1_walk.config import G1WalkConfig


def import_beside(module: str) -> threading.Thread:
    """Import ``module`` in a thread of its own, so that it runs while this thread waits (on the env's
    compilers, say); a later import of it waits for this one. One that fails here is left for that
    later import to raise."""

    def run() -> None:
        try:
            importlib.import_module(module)
        except Exception:  # noqa: BLE001  (the learner's own import names it)
            pass

    thread = threading.Thread(target=run, name=f"import {module}", daemon=True)
    thread.start()
    return thread


def resume_command(argv: list[str], path: Path, script: str = "examples/g1_walk.py") -> str:
    """The command that continues a stopped run from ``path``: its own flags ``argv``, with
    ``--checkpoint PATH`` in place of its resume flags (``--resume``, ``--load_run``, ``--checkpoint``)."""
    kept, skip = [], False
    for arg in argv:
        name = arg.split("=", 1)[0]
        if skip or name == "--resume":
            skip = False
        elif name in ("--load_run", "--load-run", "--checkpoint"):
            skip = "=" not in arg  # its value is the next word
        else:
            kept.append(arg)
    world = distributed.world_size()
    launcher = ["torchrun", "--nproc-per-node", str(world)] if world > 1 else ["python"]
    return shlex.join([*launcher, script, *kept, "--checkpoint", str(path)])


def resume_path(args: Args, experiment: str) -> Path | None:
    """The checkpoint to continue from: ``--checkpoint PATH``, or with ``--resume`` the newest one."""
    if args.checkpoint and Path(args.checkpoint).is_file() and not args.resume:
        return Path(args.checkpoint)
    if not args.resume:
        if args.checkpoint:
            raise UsageError(f"--checkpoint {args.checkpoint} is no file; to search the runs, add --resume")
        return None
    return find_checkpoint(args.log_root, experiment, args.load_run, args.checkpoint or r"model_\d+\.pt")


def resumed_task_config(recorded: tuple[registry.TaskSpec, dict] | None, spec: registry.TaskSpec) -> Any:
    """The G1 task a resumed run recorded (``recorded``: :func:`registry.checkpoint_task` of its
    checkpoint), so that it goes on with the commands and rewards it started with (the task's
    defaults may have changed since); None for a fresh run, another task (fine-tuning on a new task
    takes that task's config) or a checkpoint that recorded none."""
    if recorded is None or not spec.is_g1_walk:
        return None
    from isaac_adapter.tasks.g1_walk.config import stored_config

    recorded_spec, params = recorded
    return stored_config(params, spec.config_preset) if recorded_spec.id == spec.id and params else None


def isaaclab_agent_config(spec: registry.TaskSpec, args: Args) -> tuple[RunnerConfig, Any]:
    """Isaac Lab's own task trains with the rsl_rl agent config Isaac Lab registers for it, as its
    ``train.py`` does (:meth:`RunnerConfig.from_rsl_rl`), the command line's flags on top; returns that
    and the agent config itself (its ``max_iterations`` and ``clip_actions`` are the run's and the env's)."""
    from ppo_bootstrap.rsl_rl import RslRlConfigError

    from isaac_adapter.isaaclab.velocity import registered_agent_cfg

    agent = registered_agent_cfg(spec.id)
    try:
        cfg = RunnerConfig.from_rsl_rl(agent, save_interval=args.save_interval, log_dir=None, seed=args.seed,
                                       validate_env_output=not args.no_validate)
    except RslRlConfigError as err:
        raise UsageError(f"{spec.id}'s registered rsl_rl agent config: {err}") from None
    cfg.ppo = dataclasses.replace(cfg.ppo, timeout_bootstrap=args.timeout_bootstrap)
    return cfg, agent


def train(args: Args) -> Runner:
    task_id = args.task
    experiment = args.experiment_name or (task_id or registry.default_task(args.sim, args.device))
    start = resume_path(args, experiment)
    ckpt = checkpoint.read(start) if start is not None else None  # read once, checked once
    recorded = None  # the checkpoint's task record, read where it is needed (once)
    if ckpt is not None and task_id is None:
        recorded = registry.checkpoint_task(ckpt, str(start))
        task_id = recorded[0].id
        experiment = args.experiment_name or task_id
    spec = registry.get_task(task_id or registry.default_task(args.sim, args.device))
    if ckpt is not None and spec.is_g1_walk and recorded is None:
        recorded = registry.checkpoint_task(ckpt, str(start))
    del ckpt
    # the G1-Walk tasks take env.* into their own config; a simulator's own task, into its env cfg (make_env)
    sim_overrides = [] if spec.is_g1_walk else [o for o in args.overrides if o.startswith("env.")]
    config_overrides = [o for o in args.overrides if o not in sim_overrides]  # the project's configs take these
    symmetry = args.symmetry or spec.symmetry
    if symmetry != "off" and not spec.is_g1_walk:
        raise UsageError(f"--symmetry {symmetry}: {spec.id} has no left-right mirror; use a G1-Walk task")
    if args.symmetry_loss_coef is not None and symmetry not in ("loss", "both"):
        raise UsageError(f"{args.flag('symmetry_loss_coef')} needs --symmetry loss or both ({spec.id}: {symmetry})")
    sim, env_device = registry.resolve(spec, args.sim, args.device)
    envs.check_env_overrides(spec, sim, sim_overrides)
    envs.check_sim(sim)
    if args.video is not None:
        from isaac_adapter.app.play import check_clip

        check_clip(spec, sim, args.video or ".gif", "--video")
    # the learner sits with the env, or on the GPU asked for beside a CPU env; torchrun gives rank r cuda:r
    device = distributed.init_from_env(env_device if sim != "mujoco" or args.device == "auto" else args.device)
    if sim != "mujoco":
        env_device = str(device)
    on_gpu = env_device.startswith("cuda")
    if args.cuda_graph_step and not (spec.is_g1_walk and sim in ("warp", "isaaclab") and on_gpu):
        raise UsageError(f"--cuda-graph-step: records the G1-Walk env on --sim warp or isaaclab on a GPU; "
                         f"this run is {spec.id} on --sim {sim} on {env_device}")
    num_envs = args.num_envs or spec.num_envs or (GPU_ENVS if on_gpu else CPU_ENVS)
    rank = distributed.rank()
    # a run folder another training writes is refused before the env is built (the Runner would refuse it later)
    lock = lock_run_dir(args.log_dir) if args.log_dir and rank == 0 else None
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    if args.tf32:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    agent = None  # an Isaac Lab task's registered rsl_rl agent config
    if sim == "isaaclab" and not spec.is_g1_walk:
        cfg, agent = isaaclab_agent_config(spec, args)
    else:
        cfg = RunnerConfig(
            save_interval=args.save_interval,
            log_dir=None,
            seed=args.seed,
            validate_env_output=not args.no_validate,
            ppo=PPOConfig(timeout_bootstrap=args.timeout_bootstrap, symmetry_augmentation=symmetry in ("augment", "both"),
                          symmetry_loss_coef=(1.0 if args.symmetry_loss_coef is None else args.symmetry_loss_coef)
                          if symmetry in ("loss", "both") else 0.0),
            policy=PolicyConfig(actor_hidden=(512, 256, 128), critic_hidden=(512, 256, 128)),
        )
    iterations = (args.max_iterations or spec.max_iterations or getattr(agent, "max_iterations", None)
                  or (GPU_ITERATIONS if on_gpu else CPU_ITERATIONS))
    task_cfg = None
    if spec.is_g1_walk:
        from isaac_adapter.tasks.g1_walk.config import walk_config

        task_cfg = resumed_task_config(recorded, spec) or walk_config(preset=spec.config_preset)
        if args.model_variant:
            task_cfg = dataclasses.replace(task_cfg, model_variant=args.model_variant)
    # the task's agent settings, then the command line's flag and overrides (which win)
    cfg = apply_overrides({"agent": cfg}, list(spec.agent))["agent"]
    if args.num_steps_per_env is not None:
        cfg = dataclasses.replace(cfg, num_steps_per_env=args.num_steps_per_env)
    if args.torch_threads:  # else the Runner would set its own choice over the flag's
        cfg = dataclasses.replace(cfg, torch_threads=args.torch_threads)
    configs = apply_overrides({"env": task_cfg, "agent": cfg}, config_overrides)
    task_cfg, cfg = configs["env"], configs["agent"]
    if sim == "isaaclab" and task_cfg is not None:
        from isaac_adapter.isaaclab.g1_direct import check_task

        try:
            check_task(task_cfg)
        except ValueError as err:
            raise UsageError(str(err)) from None
    # tensordict imports torch._dynamo (seconds with torch's CUDA build); the learner needs it, the env
    # build mostly waits on compilers, so the import runs beside it
    import_beside("tensordict")
    env_start = time.perf_counter()
    env = envs.make_env(spec, sim, env_device, num_envs, seed=args.seed + rank, config=task_cfg,
                        env_overrides=sim_overrides, clip_actions=getattr(agent, "clip_actions", None))
    env_done = time.perf_counter()
    if hasattr(env, "validate_actions"):  # the embedded G1 envs: their finiteness check of actions syncs too
        env.validate_actions = not args.no_validate
    if args.cuda_graph_step:  # the G1 env itself (on Isaac Lab, the DirectRLEnv under the adapter)
        getattr(env, "unwrapped", env).cuda_graph = True
    log_dir = Path(args.log_dir) if args.log_dir else None
    if rank == 0:
        log_dir = log_dir or new_run_dir(args.log_root, experiment, args.run_name)
        lock = lock or lock_run_dir(log_dir)  # held until the process ends; the Runner trains under it
        write_params(log_dir, {"task": spec.id, "sim": sim, "device": env_device, **envs.env_params(env)},
                     dataclasses.asdict(cfg))
        write_git_state(log_dir)
    cfg.log_dir = str(log_dir) if log_dir else None
    learner_start = time.perf_counter()
    runner = Runner(env, cfg, device=device)
    learner_s = time.perf_counter() - learner_start
    runner.metadata = {"id": spec.id, "sim": sim, "env": envs.env_params(env)}
    if start is not None:
        runner.load(start)
        if rank == 0:
            print(f"resumed from {start} at iteration {runner.iteration}")
    if rank == 0:
        print(f"{spec.id}: {num_envs} envs x {distributed.world_size()} process(es) on {sim} ({env_device}), "
              f"{iterations} iterations, run folder {log_dir}")
        print(expectation(spec, sim, num_envs, iterations, cfg.num_steps_per_env))
        # where the wait before the first iteration goes (it counts in a time-to-walk wall clock)
        print(f"startup: {env_start - STARTED:.1f} s to import and configure, {env_done - env_start:.1f} s to build "
              f"the env, {learner_s:.1f} s to build the learner", flush=True)
    runner.signals.resume_hint = lambda path: resume_command(args.argv, path)
    with runner.signals:  # a second Ctrl-C during the export and evaluation exits as cleanly as in training
        if args.video is not None:
            from isaac_adapter.app.play import learn_with_clips

            learn_with_clips(runner, iterations, args, log_dir if rank == 0 else None)
        else:
            runner.learn(iterations)
        if rank == 0:
            finish(runner, spec, sim, env, Path(cfg.log_dir), args)
    if distributed.is_distributed():
        torch.distributed.destroy_process_group()
    return runner


def expectation(spec: registry.TaskSpec, sim: str, num_envs: int, iterations: int, steps: int) -> str:
    """What the run will reach, said before it starts (measured figures: README, BENCHMARKS.md)."""
    samples = num_envs * steps * iterations
    if spec.id == "G1-Walk-Clock-v0":
        if samples < 20e6:
            return (f"expect: {samples / 1e6:.1f}M env steps teach the G1 to stay up longer, not to walk; the gait "
                    "acceptance took 30-50M env steps (4,096 envs on a GPU, about 5 min on an H200)")
        return f"expect: {samples / 1e6:.0f}M env steps; the gait acceptance took 30-50M env steps on MuJoCo Warp and Isaac Lab"
    if spec.closing_gate:  # the CPU recipe trained on to the gate (the one task that closes with it)
        return (f"expect: {samples / 1e6:.1f}M env steps; three seeds measured on 2 cores passed the walking gate first "
                "at 12.3-16.6M (iterations 1,000-1,350, 31-41 min from launch at 5.5-6.9k env steps/s) and again at "
                "1,400 (BENCHMARKS.md, 'Time to walk on a 2-core CPU'); the gate judges the last checkpoint at the end. "
                "The ETA below counts from this run's own pace")
    if spec.id == registry.DEFAULT_CPU_TASK:
        return (f"expect: {samples / 1e6:.1f}M env steps; three seeds measured on 2 cores passed the gait acceptance "
                "at 6.8-8.6M (iterations 550-700, 22-26 min from launch at 5.2-5.9k env steps/s; BENCHMARKS.md, "
                "'Time to walk on a 2-core CPU'). The ETA below counts from this run's own pace")
    if spec.id == "G1-Walk-v0":
        return "expect: this recipe (no gait clock) learns to stand and shuffle, not to step; use G1-Walk-Clock-v0 to walk"
    return f"expect: {samples / 1e6:.1f}M env steps of {spec.id}; Isaac Lab trains its G1 tasks for 1,500 iterations"


def finish(runner: Runner, spec: registry.TaskSpec, sim: str, env, log_dir: Path, args: Args | None = None) -> None:
    """After training: export the policy, judge it on the training env, record a clip of a policy the
    judgment accepts, say what was written where."""
    written = [runner.last_checkpoint] if runner.last_checkpoint else []  # this run's, not an older one in the folder
    exported = export(runner, env, spec, log_dir / "exported")
    if spec.is_g1_walk and sim in ("mujoco", "warp", "isaaclab"):
        from isaac_adapter.evaluation import ActorCriticPolicy, EvalConfig, Evaluator
        from isaac_adapter.evaluation.g1_probe import G1WalkProbe
        from isaac_adapter.evaluation.gate import ACCEPTANCE_COMMAND, ACCEPTANCE_HORIZON_S

        task = getattr(env, "unwrapped", env)
        probe = G1WalkProbe(env, task)
        policy = ActorCriticPolicy(runner.policy, env.num_envs, runner.device)
        with torch.no_grad():
            judged = EvalConfig(horizon_s=ACCEPTANCE_HORIZON_S, seed=0, commands=ACCEPTANCE_COMMAND)
            report = Evaluator(probe, judged).evaluate(policy)
        s, verdict = report.summary(), report.verdict()
        failed = [k for k, ok in verdict.items() if k != "accepted" and not ok]
        print(f"evaluation ({ACCEPTANCE_HORIZON_S:g} s, forward {ACCEPTANCE_COMMAND[0]:g} m/s, {env.num_envs} envs"
              f"{training_world(task.task_cfg)}): falls {s['fall_rate']:.1%}, tracking error "
              f"{s['mean_velocity_tracking_error']:.3f} m/s -> "
              + ("ACCEPTED" if verdict["accepted"] else "not accepted: " + ", ".join(failed)))
        if spec.closing_gate and runner.last_checkpoint:
            closing_gate(runner.last_checkpoint)
        if args is not None and runner.last_checkpoint:
            written += closing_clip(runner, args, log_dir, verdict["accepted"])
    print("wrote: " + ", ".join(str(p) for p in [log_dir / "params", *written, *exported, log_dir / "metrics.jsonl"]))


def training_world(cfg: G1WalkConfig) -> str:
    """What sets the closing evaluation apart from the judges' (``eval``, the gates), which build an env of
    their own: it steps the training env, so its randomization and its episode rule (a
    ``train_collapse_height`` above the judges' line ends, and so counts as a fall, a dip they would
    pass). ``""`` where the two worlds are the same; else ``"; ..."`` naming what differs."""
    from isaac_adapter.evaluation.g1_probe import judged_walk_config

    differs = []
    if judged_walk_config(cfg).train_collapse_height != cfg.train_collapse_height:
        differs.append(f"episodes end under {cfg.train_collapse_height:.2f} m, the judges' line "
                       f"{cfg.eval_success_height:.2f} m")
    if cfg.randomization.enabled:
        differs.append("randomization on")
    return "; the training world: " + ", ".join(differs) if differs else ""


def closing_gate(path: Path) -> bool:
    """The walking gate (``benchmarks/g1_gate.py``) on the checkpoint at ``path``, judged as the gate
    always is (MuJoCo on the CPU, the reference physics); prints its table, returns the verdict."""
    from isaac_adapter.evaluation.gate import GateConfig, gate_checkpoint

    cfg, threads = GateConfig(), torch.get_num_threads()
    print(f"walking gate ({cfg.num_envs} envs, MuJoCo on the CPU; again: python benchmarks/g1_gate.py {path}):",
          flush=True)
    torch.set_num_threads(1)  # as g1_gate.py: the policy is small, MuJoCo's threads do the work
    try:
        result = gate_checkpoint(str(path), cfg)
    except Exception as err:  # noqa: BLE001  (training's results stand without the verdict)
        print(f"no gate verdict: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")
        return False
    finally:
        torch.set_num_threads(threads)
    print(result.format(), flush=True)
    return result.passed


def closing_clip(runner: Runner, args: Args, log_dir: Path, accepted: bool) -> list[Path]:
    """A clip of the trained policy walking (``<run>/videos/final.gif``) when the evaluation accepted it;
    otherwise, or where nothing can render, one line with the command that records one."""
    play = f"python examples/g1_walk.py --play {runner.last_checkpoint} --video g1.gif"
    if not accepted:
        print(f"no clip: the policy does not walk yet (to watch it anyway: {play})")
        return []
    from isaac_adapter.app.play import training_clip

    try:
        return [training_clip(runner, args, log_dir / "videos" / "final.gif")]
    except Exception as err:  # noqa: BLE001  (no OpenGL here: training's results stand without the clip)
        print(f"no clip: rendering failed ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}); "
              f"on a machine with OpenGL: {play}")
        return []


def export(runner: Runner, env, spec: registry.TaskSpec, directory: Path) -> list[Path]:
    """The actor as ``policy.onnx``, ``policy.pt`` (TorchScript) and ``policy.json`` in ``directory``,
    and for the G1-Walk tasks the ``deploy.yaml`` that runs it (docs/deploy.md)."""
    from ppo_bootstrap.env import POLICY
    from ppo_bootstrap.export import export_policy

    from isaac_adapter.tasks.g1_walk.config import G1WalkConfig

    obs_dim = runner.obs[POLICY].shape[-1]
    task_cfg = getattr(getattr(env, "unwrapped", env), "task_cfg", None)
    if spec.is_g1_walk and isinstance(task_cfg, G1WalkConfig):
        try:
            from isaac_adapter.tasks.g1_walk.deploy import export_deployment

            return sorted(export_deployment(runner.policy, obs_dim, task_cfg, directory, spec.id).values())
        except (ImportError, ValueError) as err:  # the end of a training run: keep the actor, say why no deploy.yaml
            print(f"deploy.yaml not written: {err}")
    return sorted(export_policy(runner.policy, obs_dim, directory).values())
