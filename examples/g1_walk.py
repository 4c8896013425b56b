"""Train, evaluate and watch the Unitree G1 walking, as Isaac Lab's train.py / play.py do.

    python examples/g1_walk.py                                   # device auto: GPU + MuJoCo Warp, else CPU MuJoCo
    python examples/g1_walk.py --task G1-Walk-Clock-v0 --num_envs 4096 --max_iterations 600
    python examples/g1_walk.py --resume                          # the newest run of the experiment, its newest checkpoint
    python examples/g1_walk.py env.rewards.action_rate=-0.05 agent.ppo.num_mini_batches=8   # config overrides
    python examples/g1_walk.py --resume --load_run 2026-11-30.* --checkpoint model_500.pt
    python examples/g1_walk.py --sim isaaclab --num_envs 4096    # the same task on Isaac Lab (Python 3.12)
    python examples/g1_walk.py --task Isaac-Velocity-Flat-G1 --num_envs 4096
    python examples/g1_walk.py --eval docs/checkpoints/g1_clock_it1296.pt   # the task comes from the checkpoint
    python examples/g1_walk.py --play docs/checkpoints/g1_clock_it1296.pt --video g1.gif
    python examples/g1_walk.py --export docs/checkpoints/g1_clock_it1296.pt --export-dir out   # + deploy.yaml
    torchrun --nproc-per-node 2 examples/g1_walk.py --device cuda --num_envs 4096
    tensorboard --logdir logs

Tasks (``--task``, see ``isaac_adapter.tasks.registry``): G1-Walk-Clock-v0 (default; the recipe that
walks), G1-Walk-Clock-Ramp-v0 (the same, smoothness penalties ramped in: passes the gate),
G1-Walk-v0, Isaac-Velocity-Flat-G1, Isaac-Velocity-Rough-G1, Mjlab-Velocity-Flat-Unitree-G1.
A run writes ``logs/<experiment>/<date>_<run>/``: params/env.yaml, params/agent.yaml, git state,
model_<it>.pt, metrics.jsonl, TensorBoard events and exported/policy.onnx + policy.pt (+ deploy.yaml for
the G1-Walk tasks, which deploy/deploy_mujoco.py runs: docs/deploy.md). Usage errors are one line;
``--debug`` shows tracebacks.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import sys
import time
from pathlib import Path

STARTED = time.perf_counter()  # before the heavy imports: the startup line counts them

# running the file directly puts examples/ on sys.path, not the repository root
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if "--play" in sys.argv or "--replay" in sys.argv:  # MuJoCo picks its OpenGL backend at import time; EGL renders headless
    os.environ.setdefault("MUJOCO_GL", "egl")

import torch  # noqa: E402

from ppo_bootstrap import PolicyConfig, PPOConfig, Runner, RunnerConfig, checkpoint, distributed  # noqa: E402
from ppo_bootstrap.overrides import OverrideError, apply_overrides  # noqa: E402
from ppo_bootstrap.run_dir import find_checkpoint, new_run_dir, write_git_state, write_params  # noqa: E402

from isaac_adapter.tasks import registry  # noqa: E402
from isaac_adapter.tasks.g1_walk.assets import VARIANTS  # noqa: E402
from isaac_adapter.tasks.g1_walk.config import G1WalkConfig  # noqa: E402

# what a CPU run of the default task gives, measured on 2 cores (README: "What a CPU run gives")
CPU_ITERATIONS = 1000
GPU_ITERATIONS = 1500


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    # no abbreviations: "--ev m.pt" must not be taken for --eval here while eval_argv misses it
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", default=[],
                        help="config overrides, as Isaac Lab's Hydra ones: env.<G1WalkConfig field> (G1-Walk tasks), "
                        "agent.<RunnerConfig field>, e.g. env.rewards.action_rate=-0.05 agent.ppo.learning_rate=3e-4")
    parser.add_argument("--task", default=None, help=f"a registered task (default {registry.DEFAULT_TASK}; "
                        "with --eval/--play/--resume: the checkpoint's)")
    parser.add_argument("--sim", default="auto", choices=("auto", *registry.SIMS),
                        help="physics: auto (MuJoCo Warp on a GPU, else MuJoCo on CPU), mujoco, warp, isaaclab, mjlab")
    parser.add_argument("--backend", choices=("mujoco", "warp"), default=None, help="older spelling of --sim")
    parser.add_argument("--device", default="auto", help="auto, cpu or cuda (under torchrun rank r takes cuda:r)")
    parser.add_argument("--num_envs", "--num-envs", type=int, default=None, help="envs per process (default: 64 on CPU, 4096 on a GPU)")
    parser.add_argument("--max_iterations", "--iterations", type=int, default=None,
                        help=f"PPO iterations (default: {CPU_ITERATIONS} on CPU, {GPU_ITERATIONS} on a GPU)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--gait-clock", action="store_true", help="older spelling of --task G1-Walk-Clock-v0")
    parser.add_argument("--model-variant", choices=sorted(VARIANTS), default=None, help="G1 MJCF (G1-Walk tasks)")
    # run folders and resume, as Isaac Lab names them
    parser.add_argument("--experiment_name", default=None, help="logs/<experiment_name>/ (default: the task id)")
    parser.add_argument("--run_name", default="", help="suffix of the run folder's date")
    parser.add_argument("--log_root", default="logs")
    parser.add_argument("--log-dir", default=None, help="write the run here instead of logs/<experiment>/<date>_<run>")
    parser.add_argument("--resume", action="store_true", help="continue the newest run's newest checkpoint")
    parser.add_argument("--load_run", default=".*", help="--resume: runs whose folder name matches this regex")
    parser.add_argument("--checkpoint", default=None,
                        help="--resume: checkpoint file name (regex) in the run; or a checkpoint path to resume from")
    parser.add_argument("--save-interval", type=int, default=50)
    parser.add_argument("--num-steps-per-env", type=int, default=None,
                        help="env steps per PPO iteration (default: the task's, else 24)")
    parser.add_argument("--timeout-bootstrap", choices=("exact", "state_value", "none"), default="exact",
                        help="value of a timeout: V(true final obs) (exact), V(s_t) as rsl_rl does, or none (a fall)")
    parser.add_argument("--symmetry", choices=("off", "augment", "loss", "both"), default="off",
                        help="left-right mirror symmetry: train on mirrored samples too (augment), add the mirror "
                        "loss (loss), or both; needs an env with a 'symmetry' (the G1-Walk tasks)")
    parser.add_argument("--symmetry-loss-coef", type=float, default=None,
                        help="weight of the mirror loss with --symmetry loss or both (default 1.0)")
    parser.add_argument("--torch-threads", type=int, default=None, help="CPU threads for torch (default: the Runner's choice)")
    parser.add_argument("--tf32", action="store_true",
                        help="TensorFloat-32 matmuls on the GPU (Ampere and newer), as Isaac Lab's train scripts "
                        "set: faster updates with a 10-bit mantissa in the products")
    parser.add_argument("--no-validate", action="store_true",
                        help="skip the per-step env contract checks and the G1 env's finite-action check "
                        "(each costs a host sync on GPU)")
    parser.add_argument("--cuda-graph-step", action="store_true",
                        help="record the G1 env's whole step (task and physics) in one CUDA graph and replay it "
                        "(--sim warp on a GPU; the first step records)")
    parser.add_argument("--headless", action="store_true", help="accepted for Isaac Lab scripts; nothing here opens a window")
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    # play and replay
    parser.add_argument("--play", metavar="CHECKPOINT", default=None,
                        help="run CHECKPOINT in one env on CPU MuJoCo, write a clip (--video) and export the policy")
    parser.add_argument("--video", default="g1_play.gif", help="--play / --replay: the clip (.gif, or .mp4 with imageio-ffmpeg)")
    parser.add_argument("--video_length", "--play-seconds", dest="video_length", type=float, default=8.0,
                        help="--play: seconds of the clip")
    parser.add_argument("--command", default="0.5,0.0,0.0", help="--play: v_x,v_y,w_z held during the clip")
    parser.add_argument("--size", default="320x240", help="--play: frame WIDTHxHEIGHT")
    parser.add_argument("--fps", type=int, default=17, help="--play: frames per second of the clip")
    parser.add_argument("--export", metavar="CHECKPOINT", default=None,
                        help="write CHECKPOINT's policy.onnx, policy.pt, policy.json and deploy.yaml (G1-Walk tasks; "
                        "docs/deploy.md) to --export-dir")
    parser.add_argument("--export-dir", default=None, help="--export: the folder (default: exported/ beside the checkpoint)")
    parser.add_argument("--replay", metavar="STATES", default=None,
                        help="render states recorded in another simulator ({'qpos': [T, envs, 7 + J], 'dt'}, as "
                        "benchmarks/isaaclab_g1.py saves them) to --video")
    parser.add_argument("--replay-env", type=int, default=0, help="--replay: which recorded env")
    parser.add_argument("--eval", metavar="CHECKPOINT", default=None,
                        help="evaluate CHECKPOINT instead of training; every other flag is examples/g1_eval.py's "
                        "(--sweep 0.60,0.50,0.45 --dataset out.parquet --num-envs ... --horizon-s ...)")
    args = parser.parse_args(argv)
    if args.backend is not None:
        args.sim = args.backend
    if args.gait_clock:
        if args.task not in (None, "G1-Walk-Clock-v0"):
            parser.error(f"--gait-clock is the task G1-Walk-Clock-v0, not {args.task}")
        args.task = "G1-Walk-Clock-v0"
    if args.symmetry_loss_coef is not None and args.symmetry not in ("loss", "both"):
        parser.error("--symmetry-loss-coef needs --symmetry loss or both")
    if args.export_dir is not None and args.export is None:
        parser.error("--export-dir needs --export CHECKPOINT")
    return args


def eval_argv(argv: list[str]) -> list[str] | None:
    """``--eval CHECKPOINT rest...`` -> ``[CHECKPOINT, rest...]`` for examples/g1_eval.py, else ``None``.

    The other flags pass untouched: flags both scripts know (--num-envs, --seed, --backend, ...)
    must reach the evaluator, not this parser's training defaults.
    """
    for i, arg in enumerate(argv):
        if arg == "--eval" and i + 1 < len(argv):
            return [argv[i + 1], *argv[:i], *argv[i + 2:]]
        if arg.startswith("--eval="):
            return [arg.removeprefix("--eval="), *argv[:i], *argv[i + 1:]]
    return None


def main(argv: list[str] | None = None) -> Runner | None:
    argv = sys.argv[1:] if argv is None else argv
    debug = "--debug" in argv
    try:
        return run(argv)
    except (registry.UsageError, checkpoint.CheckpointError, OverrideError, FileNotFoundError,
            distributed.RankMismatchError) as err:
        if debug:
            raise
        raise SystemExit(f"error: {err}") from None


def run(argv: list[str]) -> Runner | None:
    forwarded = eval_argv(argv)
    if forwarded is not None:
        from g1_eval import main as evaluate  # examples/g1_eval.py, beside this file

        evaluate([a for a in forwarded if a != "--debug"])
        return None
    args = parse_args(argv)
    args.argv = argv  # for the resume command a stopped run prints
    if args.replay:
        replay(args)
        return None
    if args.play:
        play(args)
        return None
    if args.export:
        export_checkpoint(args)
        return None
    return train(args)


def resume_path(args: argparse.Namespace, experiment: str) -> Path | None:
    """The checkpoint to continue from: ``--checkpoint PATH``, or with ``--resume`` the newest one."""
    if args.checkpoint and Path(args.checkpoint).is_file() and not args.resume:
        return Path(args.checkpoint)
    if not args.resume:
        if args.checkpoint:
            raise registry.UsageError(f"--checkpoint {args.checkpoint} is no file; to search the runs, add --resume")
        return None
    return find_checkpoint(args.log_root, experiment, args.load_run, args.checkpoint or r"model_\d+\.pt")


def resume_command(argv: list[str], path: Path) -> str:
    """The command that continues a stopped run from ``path``: its own flags, with ``--checkpoint
    PATH`` in place of its resume flags (``--resume``, ``--load_run``, ``--checkpoint``)."""
    kept, skip = [], False
    for arg in argv:
        name = arg.split("=", 1)[0]
        if skip or name == "--resume":
            skip = False
        elif name in ("--load_run", "--checkpoint"):
            skip = "=" not in arg  # its value is the next word
        else:
            kept.append(arg)
    script = os.path.relpath(__file__)
    world = distributed.world_size()
    launcher = ["torchrun", "--nproc-per-node", str(world)] if world > 1 else ["python"]
    return shlex.join([*launcher, script if not script.startswith("..") else __file__, *kept, "--checkpoint", str(path)])


def resumed_task_config(recorded: tuple[registry.TaskSpec, dict] | None, spec: registry.TaskSpec) -> G1WalkConfig | None:
    """The G1 task a resumed run recorded (``recorded``: :func:`registry.checkpoint_task` of its
    checkpoint), so that it goes on with the commands and rewards it started with (the task's
    defaults may have changed since); None for a fresh run, another task (fine-tuning on a new task
    takes that task's config) or a checkpoint that recorded none."""
    if recorded is None or not spec.is_g1_walk:
        return None
    from isaac_adapter.tasks.g1_walk.config import stored_config

    recorded_spec, params = recorded
    return stored_config(params, spec.config_preset) if recorded_spec.id == spec.id and params else None


def train(args: argparse.Namespace) -> Runner:
    # everything that can be refused is refused before the env is built
    task_id = args.task
    experiment = args.experiment_name or (task_id or registry.DEFAULT_TASK)
    start = resume_path(args, experiment)
    ckpt = checkpoint.read(start) if start is not None else None  # read once, checked once
    recorded = None  # the checkpoint's task record, read where it is needed (once)
    if ckpt is not None and task_id is None:
        recorded = registry.checkpoint_task(ckpt, str(start))
        task_id = recorded[0].id
        experiment = args.experiment_name or task_id
    spec = registry.get_task(task_id or registry.DEFAULT_TASK)
    if ckpt is not None and spec.is_g1_walk and recorded is None:
        recorded = registry.checkpoint_task(ckpt, str(start))
    del ckpt
    env_overrides = [o for o in args.overrides if o.startswith("env.")]
    if env_overrides and not spec.is_g1_walk:
        raise registry.UsageError(f"{env_overrides[0]}: {spec.id} takes its env configuration from its own simulator; "
                                  "env.* overrides are for the G1-Walk tasks (agent.* overrides work for every task)")
    if args.symmetry != "off" and not spec.is_g1_walk:
        raise registry.UsageError(f"--symmetry {args.symmetry}: {spec.id} has no left-right mirror; use a G1-Walk task")
    sim, env_device = registry.resolve(spec, args.sim, args.device)
    registry.check_sim(sim)
    # the learner sits with the env, or on the GPU asked for beside a CPU env; torchrun gives rank r cuda:r
    device = distributed.init_from_env(env_device if sim != "mujoco" or args.device == "auto" else args.device)
    if sim != "mujoco":
        env_device = str(device)
    on_gpu = env_device.startswith("cuda")
    if args.cuda_graph_step and not (spec.is_g1_walk and sim == "warp" and on_gpu):
        raise registry.UsageError(f"--cuda-graph-step: records the G1-Walk env on --sim warp on a GPU; "
                                  f"this run is {spec.id} on --sim {sim} on {env_device}")
    num_envs = args.num_envs or (4096 if on_gpu else 64)
    iterations = args.max_iterations or (GPU_ITERATIONS if on_gpu else CPU_ITERATIONS)
    rank = distributed.rank()
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    if args.tf32:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    cfg = RunnerConfig(
        save_interval=args.save_interval,
        log_dir=None,
        seed=args.seed,
        validate_env_output=not args.no_validate,
        ppo=PPOConfig(timeout_bootstrap=args.timeout_bootstrap, symmetry_augmentation=args.symmetry in ("augment", "both"),
                      symmetry_loss_coef=(1.0 if args.symmetry_loss_coef is None else args.symmetry_loss_coef)
                      if args.symmetry in ("loss", "both") else 0.0),
        policy=PolicyConfig(actor_hidden=(512, 256, 128), critic_hidden=(512, 256, 128)),
    )
    task_cfg = None
    if spec.is_g1_walk:
        from isaac_adapter.tasks.g1_walk.config import walk_config

        task_cfg = resumed_task_config(recorded, spec) or walk_config(preset=spec.config_preset)
        if args.model_variant:
            task_cfg = dataclasses.replace(task_cfg, model_variant=args.model_variant)
    # the task's agent settings, then the command line's flag and overrides (which win)
    cfg = apply_overrides({"agent": cfg}, list(spec.agent))["agent"]
    if args.num_steps_per_env is not None:
        if args.num_steps_per_env < 1:
            raise registry.UsageError(f"--num-steps-per-env {args.num_steps_per_env}: a PPO iteration needs at least "
                                      "1 env step per env (the G1 recipes use 12 or 24)")
        cfg = dataclasses.replace(cfg, num_steps_per_env=args.num_steps_per_env)
    configs = apply_overrides({"env": task_cfg, "agent": cfg}, args.overrides)
    task_cfg, cfg = configs["env"], configs["agent"]
    env_start = time.perf_counter()
    env = registry.make_env(spec, sim, env_device, num_envs, seed=args.seed + rank, config=task_cfg)
    env_done = time.perf_counter()
    if hasattr(env, "validate_actions"):  # the embedded G1 envs: their finiteness check of actions syncs too
        env.validate_actions = not args.no_validate
    if args.cuda_graph_step:
        env.cuda_graph = True
    log_dir = Path(args.log_dir) if args.log_dir else None
    if rank == 0:
        log_dir = log_dir or new_run_dir(args.log_root, experiment, args.run_name)
        log_dir.mkdir(parents=True, exist_ok=True)
        write_params(log_dir, {"task": spec.id, "sim": sim, "device": env_device, **registry.env_params(env)},
                     dataclasses.asdict(cfg))
        write_git_state(log_dir)
    cfg.log_dir = str(log_dir) if log_dir else None
    learner_start = time.perf_counter()
    runner = Runner(env, cfg, device=device)
    learner_s = time.perf_counter() - learner_start
    runner.metadata = {"id": spec.id, "sim": sim, "env": registry.env_params(env)}
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
        runner.learn(iterations)
        if rank == 0:
            finish(runner, spec, sim, env, Path(cfg.log_dir))
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
    if spec.id == "G1-Walk-v0":
        return "expect: this recipe (no gait clock) learns to stand and shuffle, not to step; use G1-Walk-Clock-v0 to walk"
    return f"expect: {samples / 1e6:.1f}M env steps of {spec.id}; Isaac Lab trains its G1 tasks for 1,500 iterations"


def finish(runner: Runner, spec: registry.TaskSpec, sim: str, env, log_dir: Path) -> None:
    """After training: export the policy, judge it on the training env, say what was written where."""
    written = sorted(log_dir.glob("model_*.pt"), key=lambda p: int(p.stem.split("_")[1]))[-1:]
    exported = export(runner, env, spec, log_dir / "exported")
    verdict = None
    if spec.is_g1_walk and sim in ("mujoco", "warp", "isaaclab"):
        from isaac_adapter.evaluation import ActorCriticPolicy, EvalConfig, Evaluator
        from isaac_adapter.evaluation.g1_probe import G1WalkProbe

        task = getattr(env, "unwrapped", env)
        probe = G1WalkProbe(env, task)
        policy = ActorCriticPolicy(runner.policy, env.num_envs, runner.device)
        with torch.no_grad():
            report = Evaluator(probe, EvalConfig(horizon_s=5.0, seed=0)).evaluate(policy)
        s, verdict = report.summary(), report.verdict()
        failed = [k for k, ok in verdict.items() if k != "accepted" and not ok]
        print(f"evaluation (5 s, forward 0.5 m/s, {env.num_envs} envs): falls {s['fall_rate']:.1%}, tracking error "
              f"{s['mean_velocity_tracking_error']:.3f} m/s -> "
              + ("ACCEPTED" if verdict["accepted"] else "not accepted: " + ", ".join(failed)))
    print("wrote: " + ", ".join(str(p) for p in [log_dir / "params", *written, *exported, log_dir / "metrics.jsonl"]))


def export(runner: Runner, env, spec: registry.TaskSpec, directory: Path) -> list[Path]:
    """The actor as ``policy.onnx``, ``policy.pt`` (TorchScript) and ``policy.json`` in ``directory``,
    and for the G1-Walk tasks the ``deploy.yaml`` that runs it (docs/deploy.md)."""
    from ppo_bootstrap.env import POLICY
    from ppo_bootstrap.export import export_policy

    obs_dim = runner.obs[POLICY].shape[-1]
    task_cfg = getattr(getattr(env, "unwrapped", env), "task_cfg", None)
    if spec.is_g1_walk and isinstance(task_cfg, G1WalkConfig):
        try:
            from isaac_adapter.tasks.g1_walk.deploy import export_deployment

            return sorted(export_deployment(runner.policy, obs_dim, task_cfg, directory, spec.id).values())
        except (ImportError, ValueError) as err:  # the end of a training run: keep the actor, say why no deploy.yaml
            print(f"deploy.yaml not written: {err}")
    return sorted(export_policy(runner.policy, obs_dim, directory).values())


def play_config(path: str, args: argparse.Namespace, flag: str = "--play") -> tuple[registry.TaskSpec, G1WalkConfig]:
    """The G1 task a checkpoint was trained on and its recorded config, for one env on CPU MuJoCo."""
    spec, _ = registry.checkpoint_task(checkpoint.read(path), path)
    if args.task and args.task != spec.id:
        raise registry.UsageError(f"{path} was trained on {spec.id}, not --task {args.task}")
    if not spec.is_g1_walk:
        raise registry.UsageError(f"{flag} runs the G1-Walk tasks on MuJoCo; {path} is {spec.id}")
    variant = {"model_variant": args.model_variant} if args.model_variant else {}
    return spec, registry.checkpoint_walk_config(path, num_envs=1, seed=args.seed, **variant)


def play(args: argparse.Namespace) -> None:
    from isaac_adapter.evaluation import ActorCriticPolicy
    from isaac_adapter.tasks.g1_walk import G1WalkEnv
    from isaac_adapter.tasks.g1_walk import render
    from isaac_adapter.tasks.g1_walk.deploy import export_deployment

    if not Path(args.play).is_file():
        raise FileNotFoundError(f"--play {args.play}: no such checkpoint")
    try:
        render.video_format(args.video)  # an MP4 without its encoder fails now, not after rendering
    except ImportError as err:
        raise registry.UsageError(str(err)) from None
    spec, cfg = play_config(args.play, args)
    env = G1WalkEnv(cfg)
    env.reset(seed=args.seed)
    obs = env.set_commands(torch.tensor([float(x) for x in args.command.split(",")]))
    policy = ActorCriticPolicy.from_checkpoint(args.play, obs, env.num_actions)
    width, height = (int(x) for x in args.size.split("x"))
    t0 = time.perf_counter()
    frames, frame_s = render.render_rollout(env, policy, args.video_length, width=width, height=height, fps=args.fps,
                                            progress=None)
    render.save_video(frames, args.video, frame_s)
    # as Isaac Lab's play.py: the exported actor goes beside the checkpoint
    exported = export_deployment(policy.policy, obs["policy"].shape[-1], cfg, Path(args.play).resolve().parent / "exported",
                                 spec.id)
    size = Path(args.video).stat().st_size / 1e6
    print(f"wrote {args.video}: {len(frames)} frames, {args.video_length:.1f} s at command {args.command}, "
          f"{size:.1f} MB, in {time.perf_counter() - t0:.0f} s; exported {', '.join(str(p) for p in exported.values())}")


def export_checkpoint(args: argparse.Namespace) -> None:
    """``--export CHECKPOINT``: its actor and ``deploy.yaml`` into ``--export-dir``, without training or rendering."""
    from isaac_adapter.tasks.g1_walk import G1WalkEnv
    from isaac_adapter.tasks.g1_walk.deploy import export_deployment

    path = Path(args.export)
    if not path.is_file():
        raise FileNotFoundError(f"--export {path}: no such checkpoint")
    spec, cfg = play_config(str(path), args, flag="--export")
    env = G1WalkEnv(cfg)
    obs = env.reset(seed=args.seed)
    policy = checkpoint.load_policy(path, obs, env.num_actions, torch.device("cpu"))
    directory = Path(args.export_dir) if args.export_dir else path.resolve().parent / "exported"
    paths = export_deployment(policy, obs["policy"].shape[-1], cfg, directory, spec.id)
    print(f"exported {spec.id}: {', '.join(str(p) for p in paths.values())}")
    print(f"run it: python deploy/deploy_mujoco.py --config {paths['deploy']} --headless")


def replay(args: argparse.Namespace) -> None:
    from isaac_adapter.tasks.g1_walk.render import replay as render_replay, save_video

    recorded = torch.load(args.replay, map_location="cpu")
    width, height = (int(x) for x in args.size.split("x"))
    qpos = recorded["qpos"][:, args.replay_env]
    frames, frame_s = render_replay(qpos, recorded["dt"], args.model_variant or G1WalkConfig.model_variant,
                                    width, height, args.fps, progress=None)
    save_video(frames, args.video, frame_s)
    print(f"wrote {args.video}: {len(frames)} frames, {len(qpos) * recorded['dt']:.1f} s recorded")


if __name__ == "__main__":
    main()
