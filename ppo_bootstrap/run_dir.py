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

import atexit
import contextlib
import fcntl
import os
import re
import socket
import subprocess
import time
from collections.abc import Iterator
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
    repo = Path(repo) if repo is not None else Path(__file__).resolve().parents[1]

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


LOCK_NAME = ".lock"


class RunDirInUseError(RuntimeError):
    """Another live training writes this run folder; the message is one line naming it and its holder."""


class RunDirLock:
    """An exclusive ``flock`` on ``<run folder>/.lock``, which records the holder (pid, host, start).

    The kernel drops the lock when its process ends, however it ends: a lock file that a killed
    training left is taken over (:attr:`took_over` names its holder). :meth:`release` removes the file.
    """

    def __init__(self, run_dir: Path, fd: int, took_over: str | None) -> None:
        self.run_dir, self.path = run_dir, run_dir / LOCK_NAME
        self.took_over = took_over
        self.owner: Any = None  # the Runner training under it, where one claimed it (claim_run_dir)
        self._fd: int | None = fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Remove the lock file and drop the lock (again: nothing)."""
        if self._fd is None:
            return
        atexit.unregister(self.release)
        _held.pop(self.run_dir, None)
        with contextlib.suppress(OSError):  # a folder that vanished has no lock file to remove
            self.path.unlink()
        os.close(self._fd)  # after the unlink: a waiting process then locks a file nobody will remove
        self._fd = None

    def __enter__(self) -> "RunDirLock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


_held: dict[Path, RunDirLock] = {}  # the run folders this process holds


def _holder_text(path: Path) -> str:
    try:
        fields = dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    except OSError:
        return "an unknown process"
    return f"pid {fields.get('pid', '?')} on {fields.get('host', '?')}, started {fields.get('started', '?')}"


def lock_run_dir(run_dir: str | os.PathLike) -> RunDirLock:
    """Take the run folder ``run_dir`` (made if missing) for this process's training.

    Raises:
        RunDirInUseError: a live process holds it (or this process does, for another trainer).
    """
    run_dir = Path(run_dir).resolve()
    if run_dir in _held:
        raise RunDirInUseError(f"run folder {run_dir} is in use by another trainer of this process")
    path = run_dir / LOCK_NAME
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        return _lock(run_dir, path)
    except OSError as err:
        raise RunWriteError("run folder", run_dir, err, "it cannot be locked for training") from err


def _lock(run_dir: Path, path: Path) -> RunDirLock:
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RunDirInUseError(f"run folder {run_dir} is in use by another training ({_holder_text(path)}); "
                                   "give this one another --log-dir, or stop that one first") from None
        try:  # the holder before may have removed the file while this process opened it: lock the one at the path
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    previous = os.read(fd, 4096).decode(errors="replace").strip()
    took_over = _holder_text(path) if previous else None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid={os.getpid()}\nhost={socket.gethostname()}\nstarted={time.strftime('%Y-%m-%d %H:%M:%S')}\n"
              .encode(), 0)
    lock = _held[run_dir] = RunDirLock(run_dir, fd, took_over)
    atexit.register(lock.release)  # an application's lock, held to the end, leaves no file to take over
    if took_over:
        print(f"run folder {run_dir}: took over the lock of {took_over}, which no longer runs", flush=True)
    return lock


@contextlib.contextmanager
def claim_run_dir(run_dir: str | os.PathLike | None, owner: Any) -> Iterator[RunDirLock | None]:
    """Hold ``run_dir`` while ``owner`` (a Runner) trains in it: the lock its application already
    took for it (:func:`lock_run_dir`, unclaimed or claimed by ``owner``), or one taken here and
    released on exit. ``None``: no run folder, nothing to hold.

    Raises:
        RunDirInUseError: another process, or another trainer of this one, holds it.
    """
    if run_dir is None:
        yield None
        return
    held = _held.get(Path(run_dir).resolve())
    if held is not None and held.owner in (None, owner):
        held.owner = owner
        yield held
        return
    with lock_run_dir(run_dir) as lock:
        lock.owner = owner
        yield lock
