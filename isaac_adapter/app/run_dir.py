"""Run folders laid out as Isaac Lab's ``train.py`` lays them out, so its users find everything where
they look for it::

    logs/<experiment>/<YYYY-MM-DD_HH-MM-SS>[_<run_name>]/
        params/env.yaml        the env's configuration
        params/agent.yaml      the Runner's configuration (PPO, policy, rollout)
        git/state.txt          commit, branch and ``git status`` of the code that ran
        git/diff.patch         uncommitted changes, when there are any
        model_<it>.pt          checkpoints (the Runner's)
        metrics.jsonl, events.out.tfevents.*
        exported/policy.onnx, exported/policy.pt    the actor, written at the end of training and by play
        .lock                  held by the training that writes the folder (:func:`lock_run_dir`)

:func:`find_checkpoint` is ``--resume`` / ``--load_run`` / ``--checkpoint``: the newest run whose
name matches, then its newest checkpoint.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

from ppo_bootstrap.disk import RunWriteError

CHECKPOINT_PATTERN = r"model_\d+\.pt"


def new_run_dir(root: str | os.PathLike = "logs", experiment: str = "default", run_name: str = "") -> Path:
    """``root/experiment/<date>_<run_name>``, created; the date orders runs as Isaac Lab's do."""
    name = time.strftime("%Y-%m-%d_%H-%M-%S") + (f"_{run_name}" if run_name else "")
    path = Path(root) / experiment / name
    path.mkdir(parents=True, exist_ok=False)
    return path


def _plain(value: Any) -> Any:
    """Tuples as lists, paths and other objects as strings: what YAML's safe dumper takes."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def write_params(run_dir: str | os.PathLike, env: dict[str, Any], agent: dict[str, Any]) -> tuple[Path, Path]:
    """``params/env.yaml`` and ``params/agent.yaml``; returns both paths."""
    import yaml

    params = Path(run_dir) / "params"
    params.mkdir(parents=True, exist_ok=True)
    paths = params / "env.yaml", params / "agent.yaml"
    for path, data in zip(paths, (env, agent)):
        _write_text(path, yaml.safe_dump(_plain(data), sort_keys=False))
    return paths


def _write_text(path: Path, text: str) -> None:
    """``path.write_text(text)``; a disk that refuses it raises one line naming the file and the reason."""
    try:
        path.write_text(text)
    except OSError as err:
        raise RunWriteError("run folder file", path, err, "not written") from err


def write_git_state(run_dir: str | os.PathLike, repo: str | os.PathLike | None = None) -> Path | None:
    """``git/state.txt`` (commit, branch, status) and ``git/diff.patch`` of the code that runs; None
    outside a git checkout or without git."""
    repo = Path(repo) if repo is not None else Path(__file__).resolve().parents[2]

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return None
    out = Path(run_dir) / "git"
    out.mkdir(parents=True, exist_ok=True)
    branch = git("rev-parse", "--abbrev-ref", "HEAD") or ""
    status = git("status", "--short") or ""
    _write_text(out / "state.txt", f"commit {commit.strip()}\nbranch {branch.strip()}\n\n{status}")
    diff = git("diff", "HEAD")
    if diff:
        _write_text(out / "diff.patch", diff)
    return out / "state.txt"


def checkpoint_iteration(path: str | os.PathLike) -> int:
    return int(re.findall(r"\d+", Path(path).name)[-1])


def find_checkpoint(
    root: str | os.PathLike, experiment: str, load_run: str = ".*", checkpoint: str = CHECKPOINT_PATTERN
) -> Path:
    """The checkpoint ``--resume`` continues from: in ``root/experiment``, the newest run whose name
    matches ``load_run`` (a regular expression, as in Isaac Lab), and in it the checkpoint of the
    highest iteration matching ``checkpoint``.

    Raises:
        FileNotFoundError: one line saying where it looked and what it found.
    """
    base = Path(root) / experiment
    runs = sorted(p for p in base.glob("*") if p.is_dir() and re.fullmatch(load_run, p.name)) if base.is_dir() else []
    for run in reversed(runs):  # a run that died before its first checkpoint is passed over
        found = [p for p in run.iterdir() if re.fullmatch(checkpoint, p.name)]
        if found:
            return max(found, key=checkpoint_iteration)
    where = f"{base} (runs matching {load_run!r}: {[r.name for r in runs][-3:] or 'none'})"
    raise FileNotFoundError(f"no checkpoint matching {checkpoint!r} in {where}")


# the lock is the library's (the Runner holds it while it trains): the application re-exports it
from ppo_bootstrap.run_lock import LOCK_NAME, RunDirInUseError, RunDirLock, claim_run_dir, lock_run_dir  # noqa: E402,F401
