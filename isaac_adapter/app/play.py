"""``play``: a checkpoint walking in one env on CPU MuJoCo, rendered to a clip, its actor exported;
the clips ``train --video`` records; replays of states recorded in another simulator.

Where the outputs go (:func:`output_dir`), as Isaac Lab's ``play.py`` puts them: into the
checkpoint's run folder (``videos/play/``, ``exported/``), so that nothing lands in the checkout.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import torch

from ppo_bootstrap import Runner, checkpoint

from isaac_adapter.app.args import PLAY_ENVS, PLAY_SECONDS, TRAIN_CLIP_SECONDS, Args, frame_size, numbers
from isaac_adapter.app.overrides import apply_overrides
from isaac_adapter.app.run_dir import find_checkpoint
from isaac_adapter.tasks import registry
from isaac_adapter.tasks.registry import UsageError

#: The project's checkout (for a source install): play and eval never write into it by default.
CHECKOUT = Path(__file__).resolve().parents[2]
DEFAULT_CLIP = "g1_play.gif"


def checkpoint_path(args: Args, path: str | None, flag: str = "checkpoint") -> Path:
    """The checkpoint ``play`` / ``eval`` take: ``path`` (given as ``flag``), ``--checkpoint PATH``, or
    the newest one of the experiment's runs matching ``--load_run`` / ``--checkpoint`` (as Isaac Lab's
    play.py finds it)."""
    if path is not None:
        if not Path(path).is_file():
            raise FileNotFoundError(f"{flag} {path}: no such checkpoint")
        return Path(path)
    if args.checkpoint and Path(args.checkpoint).is_file():
        return Path(args.checkpoint)
    experiment = args.experiment_name or args.task or registry.DEFAULT_TASK
    return find_checkpoint(args.log_root, experiment, args.load_run, args.checkpoint or r"model_\d+\.pt")


def output_dir(args: Args, ckpt: Path, experiment: str) -> Path:
    """Where ``play`` / ``eval`` of ``ckpt`` write: ``--log_dir``; else the checkpoint's folder (its run
    folder), unless that lies in the project's checkout outside ``--log_root`` (a shipped checkpoint):
    then ``<log_root>/<experiment>/<checkpoint name>/``."""
    if args.log_dir:
        return Path(args.log_dir)
    folder = ckpt.resolve().parent
    root = Path(args.log_root).resolve()
    if folder.is_relative_to(CHECKOUT) and not folder.is_relative_to(root):
        return Path(args.log_root) / experiment / ckpt.stem
    return ckpt.parent


def check_clip(spec: registry.TaskSpec, sim: str, path: str, flag: str) -> None:
    """Refuse, before building, a clip that cannot be made: a task MuJoCo cannot render, an MP4 without its encoder."""
    from isaac_adapter.app.envs import check_sim

    if not spec.is_g1_walk:
        raise UsageError(f"{flag} renders the G1-Walk tasks on MuJoCo; this run is {spec.id}")
    check_sim("mujoco")  # the clip's env is CPU MuJoCo whatever the training sim
    from isaac_adapter.tasks.g1_walk import render

    try:
        render.video_format(path)
    except ImportError as err:
        raise UsageError(str(err)) from None


def play_config(path: str, args: Args, flag: str = "--play") -> tuple[registry.TaskSpec, Any]:
    """The G1 task a checkpoint was trained on and its recorded config, for ``--num_envs`` envs on CPU
    MuJoCo, with the command line's ``env.KEY=VALUE`` overrides (say, pushes every 2-3 s for a clip)."""
    spec, _ = registry.checkpoint_task(checkpoint.read(path), path)
    if args.task and args.task != spec.id:
        raise UsageError(f"{path} was trained on {spec.id}, not --task {args.task}")
    if not spec.is_g1_walk:
        raise UsageError(f"{flag} runs the G1-Walk tasks on MuJoCo; {path} is {spec.id}")
    if args.sim not in ("auto", "mujoco"):
        raise UsageError(f"{args.flag('sim')} {args.sim}: {flag} runs on CPU MuJoCo (--sim mujoco)")
    variant = {"model_variant": args.model_variant} if args.model_variant else {}
    cfg = registry.checkpoint_walk_config(path, num_envs=args.num_envs or PLAY_ENVS, seed=args.seed,
                                         randomized=True, **variant)
    # a group validated once with all its overrides; an agent.* key is refused in one line: play has no agent
    return spec, apply_overrides({"env": cfg}, args.overrides)["env"]


def play(args: Args, path: str | None = None, flag: str = "checkpoint") -> Path:
    """Render the checkpoint ``path`` (given as ``flag``; see :func:`checkpoint_path`) to ``--video``
    and export its actor with its ``deploy.yaml``; returns the clip's path."""
    from isaac_adapter.evaluation import ActorCriticPolicy
    from isaac_adapter.tasks.g1_walk import G1WalkEnv, render
    from isaac_adapter.tasks.g1_walk.deploy import export_deployment

    ckpt = checkpoint_path(args, path, flag)
    spec, cfg = play_config(str(ckpt), args, flag)
    out = output_dir(args, ckpt, args.experiment_name or spec.id)
    clip = Path(args.video) if args.video else out / "videos" / "play" / DEFAULT_CLIP
    try:
        render.video_format(clip)  # an MP4 without its encoder fails now, not after rendering
    except ImportError as err:
        raise UsageError(str(err)) from None
    commands = numbers(args.command, 3, args.flag("command"), "0.5,0.0,0.0")
    width, height = frame_size(args.size, args.flag("size"))
    env = G1WalkEnv(cfg)
    env.reset(seed=args.seed)
    obs = env.set_commands(torch.tensor(commands))
    policy = ActorCriticPolicy.from_checkpoint(str(ckpt), obs, env.num_actions)
    seconds = args.video_length or PLAY_SECONDS
    t0 = time.perf_counter()
    frames, frame_s = render.render_rollout(env, policy, seconds, width=width, height=height, fps=args.fps,
                                            progress=None)
    clip.parent.mkdir(parents=True, exist_ok=True)
    render.save_video(frames, clip, frame_s)
    # as Isaac Lab's play.py: the exported actor goes into the run folder
    exported = export_deployment(policy.policy, obs["policy"].shape[-1], cfg, out / "exported", spec.id)
    size = clip.stat().st_size / 1e6
    print(f"wrote {clip}: {len(frames)} frames, {seconds:.1f} s at command {args.command}, "
          f"{size:.1f} MB, in {time.perf_counter() - t0:.0f} s; exported {', '.join(str(p) for p in exported.values())}")
    return clip


def export_checkpoint(args: Args, path: str | None, flag: str = "checkpoint") -> dict[str, Path]:
    """The checkpoint's actor and its ``deploy.yaml`` into ``--export-dir`` (default: ``exported/`` in
    its run folder, :func:`output_dir`), without training or rendering."""
    from isaac_adapter.tasks.g1_walk import G1WalkEnv
    from isaac_adapter.tasks.g1_walk.deploy import export_deployment

    ckpt = checkpoint_path(args, path, flag)
    spec, cfg = play_config(str(ckpt), args, flag)
    directory = Path(args.export_dir) if args.export_dir else output_dir(args, ckpt, args.experiment_name or spec.id) / "exported"
    env = G1WalkEnv(dataclasses.replace(cfg, num_envs=1))
    obs = env.reset(seed=args.seed)
    policy = checkpoint.load_policy(ckpt, obs, env.num_actions, torch.device("cpu"))
    paths = export_deployment(policy, obs["policy"].shape[-1], cfg, directory, spec.id)
    print(f"exported {spec.id}: {', '.join(str(p) for p in paths.values())}")
    print(f"run it: python deploy/deploy_mujoco.py --config {paths['deploy']} --headless")
    return paths


def replay(args: Args, states: str) -> Path:
    """Render states recorded in another simulator (``{'qpos': [T, envs, 7 + J], 'dt'}``) to ``--video``."""
    from isaac_adapter.tasks.g1_walk.config import G1WalkConfig
    from isaac_adapter.tasks.g1_walk.render import replay as render_replay, save_video

    if not Path(states).is_file():
        raise FileNotFoundError(f"--replay {states}: no such file")
    recorded = torch.load(states, map_location="cpu")
    width, height = frame_size(args.size, args.flag("size"))
    qpos = recorded["qpos"][:, args.replay_env]
    frames, frame_s = render_replay(qpos, recorded["dt"], args.model_variant or G1WalkConfig.model_variant,
                                    width, height, args.fps, progress=None)
    clip = Path(args.video) if args.video else Path(states).parent / "videos" / "replay" / DEFAULT_CLIP
    clip.parent.mkdir(parents=True, exist_ok=True)
    save_video(frames, clip, frame_s)
    print(f"wrote {clip}: {len(frames)} frames, {len(qpos) * recorded['dt']:.1f} s recorded")
    return clip


# -- clips during training ----------------------------------------------------------------------

def training_clip(runner: Runner, args: Args, clip: Path) -> Path:
    """A clip of the policy as it is now: one env of the run's task on CPU MuJoCo, ``--video_length``
    seconds (default 2) at ``--command``'s forward walk, drawn without shadows (cheap), into ``clip``."""
    from isaac_adapter.evaluation import ActorCriticPolicy
    from isaac_adapter.tasks.g1_walk import G1WalkEnv, render

    task = getattr(runner.env, "unwrapped", runner.env).task_cfg
    env = G1WalkEnv(dataclasses.replace(task, num_envs=1, device="cpu", seed=args.seed))
    env.reset(seed=args.seed)
    obs = env.set_commands(torch.tensor(numbers(args.command, 3, args.flag("command"), "0.5,0.0,0.0")))
    policy = ActorCriticPolicy(runner.policy, 1, runner.device)

    def act(o):
        return policy(o).to("cpu")

    act.reset = policy.reset  # type: ignore[attr-defined]
    width, height = frame_size(args.size, args.flag("size"))
    frames, frame_s = render.render_rollout(env, act, args.video_length or TRAIN_CLIP_SECONDS, width=width,
                                            height=height, fps=args.fps, progress=None, draft=True)
    clip.parent.mkdir(parents=True, exist_ok=True)
    render.save_video(frames, clip, frame_s)
    return clip


def learn_with_clips(runner: Runner, iterations: int, args: Args, log_dir: Path | None) -> list[Path]:
    """``runner.learn(iterations)`` in stretches of ``--video_interval`` iterations, a clip after each
    into ``<run>/videos/train/it_<iteration>.<gif|mp4>`` (rank 0); the Runner writes its checkpoint
    at the end of each stretch. Stops early when training was interrupted."""
    suffix = Path(args.video).suffix if args.video and Path(args.video).suffix else ".gif"
    clips: list[Path] = []
    end = runner.iteration + iterations
    while runner.iteration < end:
        stretch = min(args.video_interval - runner.iteration % args.video_interval, end - runner.iteration)
        runner.learn(stretch)
        if runner.interrupted:
            break
        if log_dir is not None:
            clip = training_clip(runner, args, log_dir / "videos" / "train" / f"it_{runner.iteration}{suffix}")
            print(f"clip: {clip}", flush=True)
            clips.append(clip)
    return clips
