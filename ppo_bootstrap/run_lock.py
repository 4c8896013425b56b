"""One training per run folder: an ``flock`` on ``<run folder>/.lock`` held while a Runner trains
into it (the application takes it earlier, before it builds the env), so checkpoints of two
trainings are never interleaved. A lock file that a killed training left behind is taken over."""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ppo_bootstrap.disk import RunWriteError

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
