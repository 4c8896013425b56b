"""Train the Unitree G1 to follow velocity commands; by default on CPU with the embedded MuJoCo backend.

    python examples/g1_walk.py                                   # 64 envs, all cores
    python examples/g1_walk.py --iterations 3000 --log-dir runs/g1_walk
    python examples/g1_walk.py --checkpoint runs/g1_walk/model_500.pt  # resume exactly
    python examples/g1_walk.py --device cuda --backend warp --num-envs 4096   # MuJoCo Warp on a GPU
    torchrun --nproc-per-node 2 examples/g1_walk.py --device cuda --backend warp --num-envs 4096
    python examples/g1_walk.py --eval runs/g1_walk/model_1500.pt --sweep 0.60,0.50,0.45
    python examples/g1_walk.py --play runs/g1_walk/model_1500.pt --video g1.gif      # watch it
    python examples/g1_walk.py --sim isaaclab --device cuda --num-envs 4096 --gait-clock   # the task on Isaac Lab
    python examples/g1_walk.py --sim isaaclab --task Isaac-Velocity-Flat-G1 --device cuda --num-envs 4096
    python examples/g1_walk.py --replay clip.pt --video isaac.gif    # render states recorded on Isaac Lab
    tensorboard --logdir runs

The console prints one block per iteration (steps/s, losses, falls by cause vs timeouts);
TensorBoard logs and ``model_<iteration>.pt`` checkpoints go to ``--log-dir``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

# running the file directly puts examples/ on sys.path, not the repository root
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if "--play" in sys.argv or "--replay" in sys.argv:  # MuJoCo picks its OpenGL backend at import time; EGL renders headless
    os.environ.setdefault("MUJOCO_GL", "egl")

import torch  # noqa: E402

from ppo_bootstrap import PolicyConfig, PPOConfig, Runner, RunnerConfig, distributed  # noqa: E402

from isaac_adapter.tasks.g1_walk import G1WalkConfig, G1WalkEnv  # noqa: E402
from isaac_adapter.tasks.g1_walk.assets import VARIANTS  # noqa: E402
from isaac_adapter.tasks.g1_walk.config import walk_config  # noqa: E402
from isaac_adapter.tasks.g1_walk.env import BACKENDS  # noqa: E402

TASKS = ("G1-Walk", "Isaac-Velocity-Flat-G1", "Isaac-Velocity-Rough-G1")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    # no abbreviations: "--ev m.pt" must not be taken for --eval here while eval_argv misses it
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("--num-envs", type=int, default=64, help="envs per process")
    parser.add_argument("--iterations", type=int, default=1500)
    parser.add_argument("--device", default="cpu", help="cpu or cuda (under torchrun each rank takes cuda:<local rank>)")
    parser.add_argument("--backend", choices=sorted(BACKENDS), default="mujoco",
                        help="--sim mujoco's physics: mujoco (CPU threads) or warp (MuJoCo Warp on --device)")
    parser.add_argument("--sim", choices=("mujoco", "isaaclab"), default="mujoco",
                        help="mujoco: the embedded backends; isaaclab: Isaac Lab 3 kit-less (Python 3.12, "
                        "ISAACSIM_ASSET_ROOT from python -m isaac_adapter.isaaclab.assets)")
    parser.add_argument("--task", choices=TASKS, default=TASKS[0],
                        help="G1-Walk: this project's task (any --sim); Isaac-Velocity-*-G1: Isaac Lab's own (--sim isaaclab)")
    parser.add_argument("--model-variant", choices=sorted(VARIANTS), default=G1WalkConfig.model_variant)
    parser.add_argument("--gait-clock", action="store_true",
                        help="the task with a 0.8 s gait clock in the observation and its rewards (train, --eval, --play alike)")
    parser.add_argument("--checkpoint", default=None, help="resume from this model_<it>.pt")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log-dir", default=None, help="default: runs/g1_walk/<date_time>")
    parser.add_argument("--num-steps-per-env", type=int, default=24)
    parser.add_argument("--save-interval", type=int, default=50)
    parser.add_argument("--timeout-bootstrap", choices=("exact", "state_value", "none"), default="exact",
                        help="value of a timeout: V(true final obs) (exact), V(s_t) as rsl_rl does, or none (a fall)")
    parser.add_argument(
        "--torch-threads", type=int, default=1,
        help="CPU threads for torch; physics already uses every core, and spinning torch threads "
        "competing with it made 64-env policy inference 25x slower on 2 cores (0: torch default)",
    )
    parser.add_argument("--no-validate", action="store_true",
                        help="skip the per-step env contract checks (each costs a host sync on GPU)")
    parser.add_argument("--play", metavar="CHECKPOINT", default=None,
                        help="run CHECKPOINT in one env on CPU MuJoCo and write a GIF (--video)")
    parser.add_argument("--video", default="g1_play.gif", help="--play: where the GIF goes")
    parser.add_argument("--play-seconds", type=float, default=8.0)
    parser.add_argument("--command", default="0.5,0.0,0.0", help="--play: v_x,v_y,w_z held during the clip")
    parser.add_argument("--size", default="480x320", help="--play: frame WIDTHxHEIGHT")
    parser.add_argument("--fps", type=int, default=25, help="--play: frames per second of the GIF")
    parser.add_argument("--replay", metavar="STATES", default=None,
                        help="render states recorded in another simulator ({'qpos': [T, envs, 7 + J], 'dt'}, as "
                        "benchmarks/isaaclab_g1.py saves them) to --video")
    parser.add_argument("--replay-env", type=int, default=0, help="--replay: which recorded env")
    parser.add_argument("--eval", metavar="CHECKPOINT", default=None,
                        help="evaluate CHECKPOINT instead of training; every other flag is examples/g1_eval.py's "
                        "(--sweep 0.60,0.50,0.45 --dataset out.parquet --num-envs ... --horizon-s ...)")
    args = parser.parse_args(argv)
    if args.task != TASKS[0] and args.sim != "isaaclab":
        parser.error(f"--task {args.task} is Isaac Lab's own task: add --sim isaaclab")
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
    forwarded = eval_argv(argv)
    if forwarded is not None:
        from g1_eval import main as evaluate  # examples/g1_eval.py, beside this file

        evaluate(forwarded)
        return None
    args = parse_args(argv)
    if args.play:
        play(args)
        return None
    if args.replay:
        replay(args)
        return None
    if args.sim == "isaaclab":
        from isaac_adapter.isaaclab.robot import IsaacLabSetupError, asset_root, require_isaaclab

        try:  # before any env is built: one line that names the fix
            require_isaaclab()
            asset_root()
        except IsaacLabSetupError as err:
            raise SystemExit(f"error: {err}") from None
    if args.torch_threads > 0:
        torch.set_num_threads(args.torch_threads)
    device = distributed.init_from_env(args.device)  # a no-op unless launched by torchrun
    rank = distributed.rank()
    log_dir = args.log_dir or os.path.join("runs", "g1_walk", time.strftime("%Y-%m-%d_%H-%M-%S"))
    env = make_env(args, device, rank)
    cfg = RunnerConfig(
        num_steps_per_env=args.num_steps_per_env,
        save_interval=args.save_interval,
        log_dir=log_dir,
        seed=args.seed,
        validate_env_output=not args.no_validate,
        ppo=PPOConfig(timeout_bootstrap=args.timeout_bootstrap),
        policy=PolicyConfig(actor_hidden=(512, 256, 128), critic_hidden=(512, 256, 128)),
    )
    runner = Runner(env, cfg, device=device)
    if args.checkpoint:
        runner.load(args.checkpoint)
        if rank == 0:
            print(f"resumed from {args.checkpoint} at iteration {runner.iteration}")
    if rank == 0:
        physics = args.backend if args.sim == "mujoco" else "Isaac Lab (Newton, MuJoCo-Warp)"
        print(f"{args.task}: {args.num_envs} envs x {distributed.world_size()} process(es) on {physics}, logs in {log_dir}")
    runner.learn(args.iterations)
    if distributed.is_distributed():
        torch.distributed.destroy_process_group()
    return runner


def make_env(args: argparse.Namespace, device: torch.device, rank: int):
    """The env the flags ask for, as a ``VecEnv``."""
    seed = args.seed + rank
    if args.sim == "isaaclab":
        if args.task == "G1-Walk":
            from isaac_adapter.isaaclab.g1_direct import make_g1_direct_env

            return make_g1_direct_env(task_config(args, num_envs=args.num_envs, seed=seed, device=str(device)))
        from isaac_adapter.isaaclab.velocity import make_velocity_g1_env

        return make_velocity_g1_env(args.task, num_envs=args.num_envs, device=str(device))
    # MuJoCo on CPU keeps the env's tensors on the CPU (the Runner moves them); Warp steps on the device.
    env_device = str(device) if args.backend == "warp" else "cpu"
    return G1WalkEnv(task_config(args, num_envs=args.num_envs, seed=seed, device=env_device), backend=args.backend)


def task_config(args: argparse.Namespace, **kwargs) -> G1WalkConfig:
    """The task the flags ask for (the default task, or the gait-clock variant)."""
    return walk_config(args.gait_clock, model_variant=args.model_variant, **kwargs)


def play(args: argparse.Namespace) -> None:
    from isaac_adapter.evaluation import ActorCriticPolicy
    from isaac_adapter.tasks.g1_walk.render import render_rollout, save_gif

    env = G1WalkEnv(task_config(args, num_envs=1, seed=args.seed))
    env.reset(seed=args.seed)
    obs = env.set_commands(torch.tensor([float(x) for x in args.command.split(",")]))
    policy = ActorCriticPolicy.from_checkpoint(args.play, obs, env.num_actions)
    width, height = (int(x) for x in args.size.split("x"))
    frames, frame_s = render_rollout(env, policy, args.play_seconds, width=width, height=height, fps=args.fps)
    save_gif(frames, args.video, frame_s)
    print(f"wrote {args.video}: {len(frames)} frames, {args.play_seconds:.1f} s at command {args.command}")


def replay(args: argparse.Namespace) -> None:
    from isaac_adapter.tasks.g1_walk.render import replay as render_replay, save_gif

    recorded = torch.load(args.replay, map_location="cpu")
    width, height = (int(x) for x in args.size.split("x"))
    qpos = recorded["qpos"][:, args.replay_env]
    frames, frame_s = render_replay(qpos, recorded["dt"], args.model_variant, width, height, args.fps)
    save_gif(frames, args.video, frame_s)
    print(f"wrote {args.video}: {len(frames)} frames, {len(qpos) * recorded['dt']:.1f} s recorded")


if __name__ == "__main__":
    main()
