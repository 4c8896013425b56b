"""The command line: ``python -m isaac_adapter.app {train,play,eval,list} [flags]``, and without a
subcommand the flags of ``examples/g1_walk.py`` (training; ``--play``, ``--eval``, ``--export`` and
``--replay`` pick the other modes).

Usage errors are one line (``error: ...``, exit status 1); ``--debug`` shows tracebacks.
"""

from __future__ import annotations

import sys
from typing import Any

from ppo_bootstrap import checkpoint, distributed
from ppo_bootstrap.disk import RunWriteError, describe
from ppo_bootstrap.run_lock import RunDirInUseError

from isaac_adapter.app import args as flags
from isaac_adapter.app.args import EVAL, LEGACY, PLAY, TRAIN, Args
from isaac_adapter.app.overrides import OverrideError
from isaac_adapter.tasks import registry

SUBCOMMANDS = (TRAIN, PLAY, EVAL, "list")
USAGE_ERRORS = (registry.UsageError, checkpoint.CheckpointError, OverrideError, RunDirInUseError, OSError,
                distributed.RankMismatchError)


def one_line(err: BaseException) -> str:
    """An error as one line; an OS error by its file and the OS's reason (``No space left on device (ENOSPC)``)."""
    if isinstance(err, OSError) and not isinstance(err, (FileNotFoundError, RunWriteError)) and err.filename:
        return f"{err.filename}: {describe(err)}"
    return str(err).splitlines()[0] if str(err) else type(err).__name__


DESCRIPTIONS = {
    LEGACY: "Train a registered task (the G1 walking task by default), or with --play / --eval / --export / --replay "
            "watch, judge or export a checkpoint. Subcommands: python -m isaac_adapter.app {train,play,eval,list}.",
    TRAIN: "Train a registered task into <log_root>/<experiment_name>/<timestamp>_<run_name>/, as Isaac Lab's train.py.",
    PLAY: "Render a checkpoint in one env on CPU MuJoCo and export its actor into its run folder, as Isaac Lab's play.py.",
    EVAL: "Judge a G1-Walk checkpoint: falls, gait acceptance, a threshold sweep, plots into <run>/eval/.",
}


def parse(command: str, argv: list[str]) -> Args:
    """``argv`` as ``command``'s flags (:func:`isaac_adapter.app.args.parse`), with its help text."""
    name = "examples/g1_walk.py" if command == LEGACY else f"python -m isaac_adapter.app {command}"
    return flags.parse(command, argv, DESCRIPTIONS[command], prog=name)


def parse_args(argv: list[str] | None = None) -> Args:
    """``examples/g1_walk.py``'s flags (training, with play's for ``--play``); a mistake exits with one line."""
    try:
        return parse(LEGACY, sys.argv[1:] if argv is None else argv)
    except registry.UsageError as err:
        raise SystemExit(f"error: {err}") from None


def eval_argv(argv: list[str]) -> list[str] | None:
    """``--eval CHECKPOINT rest...`` -> ``[CHECKPOINT, rest...]`` for the ``eval`` subcommand, else ``None``.

    The other flags pass untouched: flags both know (--num_envs, --seed, --sim, ...) must reach
    the evaluator, not the training defaults.
    """
    for i, arg in enumerate(argv):
        if arg == "--eval" and i + 1 < len(argv):
            return [argv[i + 1], *argv[:i], *argv[i + 2:]]
        if arg.startswith("--eval="):
            return [arg.removeprefix("--eval="), *argv[:i], *argv[i + 1:]]
    return None


def list_tasks() -> None:
    """``list``: every registered task, its physics and what it is (mjlab's ``list-envs``)."""
    width = max(len(t) for t in registry.TASKS)
    for spec in registry.TASKS.values():
        print(f"{spec.id:<{width}}  --sim {','.join(spec.sims):<22}  {spec.description}")


def run(argv: list[str]) -> Any:
    """One command line, errors raised (:data:`USAGE_ERRORS`)."""
    command = argv[0] if argv and argv[0] in SUBCOMMANDS else None
    rest = argv[1:] if command else argv
    from isaac_adapter.app import eval as evaluation, play, train

    if command == "list":
        return list_tasks()
    if command == EVAL:
        return evaluation.evaluate(parse(EVAL, rest))
    if command == PLAY:
        parsed = parse(PLAY, rest)
        return play.play(parsed, parsed.path)
    if command == TRAIN:
        return train.train(parse(TRAIN, rest))
    forwarded = eval_argv(rest)
    if forwarded is not None:
        evaluation.main([a for a in forwarded if a != "--debug"])
        return None
    parsed = parse(LEGACY, rest)
    if parsed.replay:
        play.replay(parsed, parsed.replay)
        return None
    if parsed.play:
        play.play(parsed, parsed.play, "--play")
        return None
    if parsed.export:
        play.export_checkpoint(parsed, parsed.export, "--export")
        return None
    return train.train(parsed)


def main(argv: list[str] | None = None) -> Any:
    """The command line's entry point: :func:`run`, a usage error as one line (``--debug``: the traceback)."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        return run(argv)
    except USAGE_ERRORS as err:
        if "--debug" in argv:
            raise
        raise SystemExit(f"error: {one_line(err)}") from None
