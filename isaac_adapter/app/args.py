"""Every command-line flag of the application, declared once.

One dataclass, :class:`Args`, as CleanRL declares its scripts' flags: a field is a flag
``--<field>`` with its default and help beside it. Spellings follow Isaac Lab's scripts
(``--num_envs``, ``--max_iterations``, ``--load_run``, ...); each underscored flag also takes its
hyphenated form (``--num-envs``), and the project's older spellings (``--iterations``,
``--backend``, ``--log-dir``, ``--play-seconds``) stay aliases. A field says which subcommands
take it (``train``, ``play``, ``eval``; ``--task``, ``--sim`` and ``--num_envs`` are everyone's).

:func:`parse` builds the parser of one subcommand from the fields, reads the command line and
checks counts, sizes and output folders with :func:`validate` before anything is built; every
mistake is one :class:`~isaac_adapter.tasks.registry.UsageError` line naming the flag as it was
typed.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ppo_bootstrap.episode import TIMEOUT_BOOTSTRAP_MODES
from ppo_bootstrap.ppo import PPOConfig

from isaac_adapter.evaluation.sweep import SWEEP_HEIGHTS
from isaac_adapter.tasks import registry
from isaac_adapter.tasks.registry import UsageError

TRAIN, PLAY, EVAL = "train", "play", "eval"
ALL = (TRAIN, PLAY, EVAL)
#: The flags of ``examples/g1_walk.py`` without a subcommand: training, with play's flags for ``--play``.
LEGACY = "legacy"

#: What a CPU run of the default task gives, measured on 2 cores (README: "What a CPU run gives").
CPU_ITERATIONS = 1000
GPU_ITERATIONS = 1500
CPU_ENVS, GPU_ENVS, EVAL_ENVS, PLAY_ENVS = 64, 4096, 32, 1
#: Seconds of a clip: play's, and the short one ``train --video`` records (cheap on CPU MuJoCo).
PLAY_SECONDS, TRAIN_CLIP_SECONDS = 8.0, 2.0


def arg(default: Any, help: str, *, commands: tuple[str, ...] = ALL, aliases: tuple[str, ...] = (), **argparse_kw: Any) -> Any:
    """A flag's field: its default, help, subcommands, older spellings and argparse settings."""
    meta = {"help": help, "commands": commands, "aliases": aliases, "argparse": argparse_kw}
    return field(default=default, metadata=meta)


def _variants() -> list[str]:
    from isaac_adapter.tasks.g1_walk.assets import VARIANTS

    return sorted(VARIANTS)


@dataclass
class Args:
    """The application's flags. ``None`` defaults are filled where the run is known (the device, the
    subcommand, the checkpoint), as the help of each says."""

    # -- the run: everyone's ------------------------------------------------------------------
    task: str | None = arg(None, f"a registered task (default {registry.DEFAULT_TASK} on a GPU, "
                           f"{registry.DEFAULT_CPU_TASK} on the CPU; with a checkpoint: the "
                           f"checkpoint's). Registered: {', '.join(registry.TASKS)}")
    sim: str = arg("auto", "physics: auto (train: MuJoCo Warp on a GPU, else MuJoCo on the CPU; play and eval: "
                   "MuJoCo on the CPU), mujoco, warp, isaaclab, mjlab", aliases=("--backend",),
                   choices=("auto", *registry.SIMS))
    num_envs: int | None = arg(None, f"envs per process (train: the task's, else {CPU_ENVS} on CPU, {GPU_ENVS} on a GPU; eval: "
                               f"{EVAL_ENVS}; play: {PLAY_ENVS}, the clip shows env 0)", type=int)
    seed: int = arg(0, "seed of the envs and the learner (rank r of a distributed run: seed + r)", type=int)
    device: str = arg("auto", "auto, cpu or cuda (under torchrun rank r takes cuda:r)")
    model_variant: str | None = arg(None, "G1 MJCF (G1-Walk tasks; default: the task's)", choices=_variants())
    gait_clock: bool = arg(False, "older spelling of --task G1-Walk-Clock-v0")
    headless: bool = arg(False, "accepted for Isaac Lab scripts; nothing here opens a window")
    debug: bool = arg(False, "show tracebacks instead of one-line errors")
    # -- run folders and resume, as Isaac Lab's rsl_rl scripts name them -----------------------
    experiment_name: str | None = arg(None, "<log_root>/<experiment_name>/ (default: the task id)")
    run_name: str = arg("", "suffix of the run folder's timestamp: <timestamp>_<run_name>", commands=(TRAIN,))
    log_root: str = arg("logs", "root of the run folders (Isaac Lab's: logs/rsl_rl); play and eval write under it "
                        "when the checkpoint is in no run folder")
    log_dir: str | None = arg(None, "write here instead of <log_root>/<experiment_name>/<timestamp>_<run_name> "
                              "(play and eval: instead of the checkpoint's run folder)")
    resume: bool = arg(False, "continue the newest run's newest checkpoint", commands=(TRAIN,))
    load_run: str = arg(".*", "runs whose folder name matches this regex (--resume, or play/eval without a path)")
    checkpoint: str | None = arg(None, "a checkpoint file name (regex) in the run; or a checkpoint path")
    distributed: bool = arg(False, "data-parallel over the processes torchrun starts (torchrun --nproc-per-node N "
                            "... --distributed); a torchrun launch is distributed without it too", commands=(TRAIN,))
    # -- training ---------------------------------------------------------------------------------
    max_iterations: int | None = arg(None, f"PPO iterations (the task's, else {CPU_ITERATIONS} on CPU, {GPU_ITERATIONS} "
                                     "on a GPU)",
                                     commands=(TRAIN,), aliases=("--iterations",), type=int)
    save_interval: int = arg(50, "a checkpoint every this many iterations (0: at the end only)", commands=(TRAIN,),
                             type=int)
    num_steps_per_env: int | None = arg(None, "env steps per PPO iteration (default: the task's, else 24)",
                                        commands=(TRAIN,), type=int)
    timeout_bootstrap: str = arg(PPOConfig.timeout_bootstrap, "value of a timeout: V(true final obs) (exact), V(s_t) "
                                 "as rsl_rl does (state_value), or none (a fall)", commands=(TRAIN,),
                                 choices=TIMEOUT_BOOTSTRAP_MODES)
    symmetry: str | None = arg(None, "left-right mirror symmetry: train on mirrored samples too (augment), add the "
                               "mirror loss (loss), or both; needs an env with a 'symmetry' (the G1-Walk tasks; "
                               "default: the task's, off for most)", commands=(TRAIN,),
                               choices=("off", "augment", "loss", "both"))
    symmetry_loss_coef: float | None = arg(None, "weight of the mirror loss with --symmetry loss or both (default "
                                           "1.0)", commands=(TRAIN,), type=float)
    torch_threads: int | None = arg(None, "CPU threads for torch (default: the task's agent.torch_threads, else the "
                                    "Runner's half of the cores; 1 on a machine busy with other work)", commands=(TRAIN,),
                                    type=int)
    tf32: bool = arg(False, "TensorFloat-32 matmuls on the GPU (Ampere and newer), as Isaac Lab's train scripts set: "
                     "faster updates with a 10-bit mantissa in the products", commands=(TRAIN,))
    no_validate: bool = arg(False, "skip the per-step env contract checks and the G1 env's finite-action check "
                            "(each costs a host sync on GPU)", commands=(TRAIN,))
    cuda_graph_step: bool = arg(False, "record the G1 env's whole step (task and physics) in one CUDA graph and "
                                "replay it (--sim warp or isaaclab on a GPU; the first step records)", commands=(TRAIN,))
    # -- clips: training (--video) and play ----------------------------------------------------------
    video: str | None = arg(None, "train: record a clip of one env every --video_interval iterations into "
                            "<run>/videos/train/ (a value: its suffix, .gif or .mp4, picks the format); play: the "
                            "clip's path (default <run>/videos/play/g1_play.gif)", commands=(TRAIN, PLAY),
                            nargs="?", const="", metavar="PATH")
    video_length: float | None = arg(None, f"seconds of a clip (play: {PLAY_SECONDS}; train --video: "
                                     f"{TRAIN_CLIP_SECONDS}, drawn without shadows; Isaac Lab counts steps)",
                                     commands=(TRAIN, PLAY), aliases=("--play-seconds",), type=float)
    video_interval: int = arg(200, "train --video: iterations between clips (Isaac Lab counts env steps)",
                              commands=(TRAIN,), type=int)
    command: str = arg("0.5,0.0,0.0", "v_x,v_y,w_z held during the clip / by every evaluated env ('env' for eval: "
                       "the env's seeded commands)", commands=(PLAY, EVAL))
    size: str = arg("320x240", "frame WIDTHxHEIGHT of a clip", commands=(TRAIN, PLAY))
    fps: int = arg(17, "frames per second of a clip", commands=(TRAIN, PLAY), type=int)
    # -- evaluation ------------------------------------------------------------------------------
    sweep: str = arg(",".join(f"{h:.2f}" for h in SWEEP_HEIGHTS), "evaluation heights (m) judged on the same rollouts", commands=(EVAL,))
    dataset: str | None = arg(None, "write every episode of the rollouts to this Parquet file", commands=(EVAL,))
    horizon_s: float = arg(15.0, "seconds each env is evaluated", commands=(EVAL,), type=float)
    eval_height: float | None = arg(None, "eval_success_height (m); default: the task's", commands=(EVAL,),
                                    type=float)
    out_dir: str | None = arg(None, "where the plots go (default: <run>/eval/)", commands=(EVAL,))
    physics_threads: int = arg(0, "CPU MuJoCo threads (0: every core)", commands=(EVAL,), type=int)
    env_rows: int = arg(16, "per-env rows printed", commands=(EVAL,), type=int)
    no_plots: bool = arg(False, "no plots", commands=(EVAL,))
    progress: bool = arg(False, "show the evaluator's progress", commands=(EVAL,))
    summary_json: str | None = arg(None, "write the headline numbers and the verdict here", commands=(EVAL,))
    # -- the subcommand's positional and examples/g1_walk.py's modes -----------------------------
    overrides: list[str] = field(default_factory=list)
    path: str | None = None  # play / eval: the checkpoint file ('zero' for eval: the zero-action policy)
    play: str | None = None
    eval: str | None = None
    export: str | None = None
    export_dir: str | None = None
    replay: str | None = None
    replay_env: int = 0
    #: The spelling each flag was given with (``num_envs`` -> ``"--num-envs"``), for messages.
    spelled: dict[str, str] = field(default_factory=dict)
    argv: list[str] = field(default_factory=list)  # the words as given, for the resume command a stopped run prints

    def flag(self, name: str) -> str:
        """``name``'s flag as the command line spelt it (``--num_envs`` when it was not given)."""
        return self.spelled.get(name, f"--{name}")


class _OneLineParser(argparse.ArgumentParser):
    """Mistakes as one :class:`UsageError` line, not argparse's usage block and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


class _Spelled(argparse.Action):
    """Stores the value as ``store`` / ``store_true`` do, and the option string it came with."""

    def __init__(self, option_strings, dest, flag_only: bool = False, **kw):
        self.flag_only = flag_only
        super().__init__(option_strings, dest, nargs=0 if flag_only else kw.pop("nargs", None), **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, True if self.flag_only else values)
        if option_string:
            getattr(namespace, "spelled")[self.dest] = option_string


class _Formatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """The defaults in every flag's help, the description as written."""


def _task_table() -> str:
    width = max(len(t) for t in registry.TASKS)
    rows = [f"  {spec.id:<{width}}  {spec.description} (--sim {', '.join(spec.sims)})" for spec in registry.TASKS.values()]
    return "registered tasks (--task):\n" + "\n".join(rows)


def flag_names(name: str, aliases: tuple[str, ...] = ()) -> list[str]:
    """``--num_envs``, then ``--num-envs`` and the older spellings."""
    names = [f"--{name}"]
    if "_" in name:
        names.append(f"--{name.replace('_', '-')}")
    return names + [a for a in aliases if a not in names]


def build_parser(command: str, description: str | None = None, prog: str | None = None) -> argparse.ArgumentParser:
    """The parser of ``command`` (``train``, ``play``, ``eval`` or :data:`LEGACY`), from :class:`Args`."""
    wanted = (TRAIN, PLAY) if command == LEGACY else (command,)
    # no abbreviations: "--ev m.pt" must not be taken for --eval while eval_argv misses it
    parser = _OneLineParser(prog=prog, description=description, epilog=_task_table(), formatter_class=_Formatter,
                            allow_abbrev=False, argument_default=argparse.SUPPRESS)
    for f in dataclasses.fields(Args):
        meta = f.metadata
        if "help" not in meta or not set(meta["commands"]) & set(wanted):
            continue
        kw = dict(meta["argparse"])
        if isinstance(f.default, bool):
            kw["flag_only"] = True
        parser.add_argument(*flag_names(f.name, meta["aliases"]), dest=f.name, action=_Spelled,
                            default=f.default, help=meta["help"], **kw)
    if command in (TRAIN, LEGACY):
        parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", default=[],
                            help="config overrides, as Isaac Lab's Hydra ones: env.<G1WalkConfig field> (G1-Walk "
                            "tasks), agent.<RunnerConfig field>, e.g. env.rewards.action_rate=-0.05 "
                            "agent.ppo.learning_rate=3e-4")
    if command in (PLAY, EVAL):
        parser.add_argument("path", nargs="?", default=None, metavar="CHECKPOINT",
                            help="a checkpoint model_<it>.pt" + (" or 'zero' (the zero-action policy)" if command == EVAL
                                                                 else "") + "; default: --load_run / --checkpoint in "
                            "the experiment's run folders")
    if command == LEGACY:
        parser.add_argument("--play", metavar="CHECKPOINT", default=None,
                            help="run CHECKPOINT in one env on CPU MuJoCo, write a clip (--video) and export the policy")
        parser.add_argument("--export", metavar="CHECKPOINT", default=None,
                            help="write CHECKPOINT's policy.onnx, policy.pt, policy.json and deploy.yaml (G1-Walk "
                            "tasks; docs/deploy.md) to --export-dir")
        parser.add_argument("--export-dir", "--export_dir", dest="export_dir", default=None,
                            help="--export: the folder (default: exported/ in the checkpoint's run folder)")
        parser.add_argument("--replay", metavar="STATES", default=None,
                            help="render states recorded in another simulator ({'qpos': [T, envs, 7 + J], 'dt'}, as "
                            "benchmarks/isaaclab_g1.py saves them) to --video")
        parser.add_argument("--replay-env", "--replay_env", dest="replay_env", type=int, default=0,
                            help="--replay: which recorded env")
        parser.add_argument("--eval", metavar="CHECKPOINT", default=None,
                            help="evaluate CHECKPOINT instead of training; every other flag is the eval subcommand's "
                            "(--sweep 0.60,0.50,0.45 --dataset out.parquet --num_envs ... --horizon_s ...)")
    return parser


def parse(command: str, argv: list[str], description: str | None = None, prog: str | None = None) -> Args:
    """``argv`` read as ``command``'s flags and checked (:func:`validate`); raises :class:`UsageError`."""
    namespace = argparse.Namespace(spelled={})
    # intermixed: Hydra-style overrides may stand anywhere among the flags, as Isaac Lab's scripts take them
    build_parser(command, description, prog).parse_intermixed_args(argv, namespace)
    values = vars(namespace)
    args = Args(**{k: v for k, v in values.items() if k in {f.name for f in dataclasses.fields(Args)}})
    args.argv = list(argv)
    validate(args, command)
    return args


# -- checks, before anything is built -------------------------------------------------------------

def _at_least(args: Args, name: str, low: int, what: str) -> None:
    """``low`` 1: a positive count; 0: non-negative; -1 (seconds, weights): a positive number."""
    value = getattr(args, name)
    if value is None:
        return
    if not (value > 0 if low < 0 else value >= low):  # "not" refuses NaN too
        raise UsageError(f"{args.flag(name)} {value}: give {'a non-negative' if low == 0 else 'a positive'} {what}")


def numbers(text: str, count: int | None, flag: str, example: str) -> tuple[float, ...]:
    """``"0.5,0,0"`` -> ``(0.5, 0.0, 0.0)``; one line naming ``flag`` and an example otherwise."""
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        values = ()
    if (count is not None and len(values) != count) or not values or not all(map(math.isfinite, values)):
        n = f"{count} numbers" if count else "numbers"
        raise UsageError(f"{flag} {text}: give {n} separated by commas, e.g. {example}")
    return values


def frame_size(text: str, flag: str = "--size") -> tuple[int, int]:
    """``"320x240"`` -> ``(320, 240)``."""
    width, sep, height = text.lower().partition("x")
    if not (sep and width.isdigit() and height.isdigit() and int(width) > 0 and int(height) > 0):
        raise UsageError(f"{flag} {text}: give WIDTHxHEIGHT in pixels, e.g. 320x240")
    return int(width), int(height)


def check_writable(path: str | os.PathLike, flag: str) -> None:
    """Refuse an output folder that cannot be made: under a file, or in a folder this user cannot write."""
    target = Path(path).expanduser().absolute()
    for folder in (target, *target.parents):
        if folder.exists():
            if not folder.is_dir():
                raise UsageError(f"{flag} {path}: {folder} is a file, not a folder")
            try:  # a file made and removed at once: permissions, read-only mounts and quotas alike
                with tempfile.TemporaryFile(dir=folder):
                    pass
            except OSError as err:
                raise UsageError(f"{flag} {path}: cannot write into {folder} ({err.strerror or err})") from None
            return


def validate(args: Args, command: str) -> None:
    """Every count, size and output folder of ``args``; raises :class:`UsageError` on the first bad one."""
    _at_least(args, "num_envs", 1, "number of envs per process")
    _at_least(args, "max_iterations", 1, "number of PPO iterations")
    _at_least(args, "save_interval", 0, "number of iterations (0: a checkpoint at the end only)")
    if args.num_steps_per_env is not None and args.num_steps_per_env < 1:
        raise UsageError(f"{args.flag('num_steps_per_env')} {args.num_steps_per_env}: a PPO iteration needs at least "
                         "1 env step per env (the G1 recipes use 12 or 24)")
    _at_least(args, "torch_threads", 1, "number of threads")
    _at_least(args, "video_interval", 1, "number of iterations between clips")
    _at_least(args, "fps", 1, "number of frames per second")
    _at_least(args, "horizon_s", -1, "number of seconds")
    _at_least(args, "video_length", -1, "number of seconds")
    _at_least(args, "physics_threads", 0, "number of threads (0: every core)")
    _at_least(args, "env_rows", 0, "number of rows")
    _at_least(args, "replay_env", 0, "env index")
    _at_least(args, "symmetry_loss_coef", 0, "weight")
    if args.symmetry_loss_coef is not None and args.symmetry not in ("loss", "both", None):
        raise UsageError(f"{args.flag('symmetry_loss_coef')} needs --symmetry loss or both")
    if args.gait_clock:
        if args.task not in (None, "G1-Walk-Clock-v0"):
            raise UsageError(f"--gait-clock is the task G1-Walk-Clock-v0, not {args.task}")
        args.task = "G1-Walk-Clock-v0"
    if args.task is not None:
        registry.get_task(args.task)
    if command in (PLAY, EVAL, LEGACY):
        if not (command == EVAL and args.command == "env"):
            numbers(args.command, 3, args.flag("command"), "0.5,0.0,0.0 (v_x, v_y, w_z)")
    if command in (TRAIN, PLAY, LEGACY):
        frame_size(args.size, args.flag("size"))
    if command == EVAL and args.sweep:
        numbers(args.sweep, None, args.flag("sweep"), "0.60,0.50,0.45")
    if args.distributed and int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        raise UsageError("--distributed: launch the processes with torchrun, e.g. torchrun --nproc-per-node 2 "
                         "-m isaac_adapter.app train --distributed")
    if args.export_dir is not None and args.export is None:
        raise UsageError("--export-dir needs --export CHECKPOINT")
    for name in ("log_dir", "log_root", "out_dir", "export_dir"):
        if getattr(args, name):
            check_writable(getattr(args, name), args.flag(name))
