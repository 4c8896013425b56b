"""A run's files on a disk that can fail: full (``ENOSPC``, ``EDQUOT``), failing (``EIO``), or a run
folder that becomes read-only (``EACCES``, ``EROFS``) or vanishes mid-run (``ENOENT``).

* Checkpoints (:func:`ppo_bootstrap.checkpoint.save_atomic`) are all or nothing: a write that
  fails leaves no file behind and raises :class:`RunWriteError`, so training stops (a run that
  cannot save would lose everything it learns from then on).
* Logs (``metrics.jsonl``, TensorBoard events; :class:`RunLog`): a write that fails on a full or
  failing disk warns once and training goes on. ``metrics.jsonl`` is tried again every iteration
  (a note says when rows are written again, and which iterations are missing); TensorBoard stops
  for the rest of the run. A row is appended whole or not at all (:func:`append_line`).
* The run folder itself gone or no longer writable: :class:`RunWriteError` at the next log
  write, since nothing more of the run can be kept.

Every message is one line naming the file and the OS's reason, e.g. ``checkpoint
runs/g1/model_500.pt: No space left on device (ENOSPC); not written, nothing of it is left``.
"""

from __future__ import annotations

import errno
import json
import os
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

METRICS = "metrics.jsonl"
"""The per-iteration statistics file of a run folder."""

FOLDER_ERRNOS = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EACCES, errno.EPERM, errno.EROFS})
"""Errors that say the run folder itself is gone or unwritable, rather than that one write failed."""


def describe(err: OSError) -> str:
    """The OS's reason for ``err`` in words and by name: ``No space left on device (ENOSPC)``."""
    if err.errno is None:
        lines = str(err).strip().splitlines()
        return f"{type(err).__name__}: {lines[0] if lines else ''}"
    return f"{os.strerror(err.errno)} ({errno.errorcode.get(err.errno, f'errno {err.errno}')})"


class RunWriteError(OSError):
    """A file of the run could not be written; ``str()`` is one line naming it, the reason and what follows.

    ``errno``, ``strerror`` and ``filename`` are those of the OS error behind it.
    """

    def __init__(self, what: str, path: str | os.PathLike, err: OSError, then: str = "") -> None:
        super().__init__(err.errno, err.strerror or describe(err), os.fspath(path))
        self.message = f"{what} {os.fspath(path)}: {describe(err)}" + (f"; {then}" if then else "")

    def add(self, more: str) -> None:
        """Append ``more`` to the message (a caller that knows what the failure means for the run)."""
        self.message += f"; {more}"

    def __str__(self) -> str:
        return self.message


class ErrorKeepingFile:
    """A binary file whose first failed write is kept in :attr:`error` (and raised as usual).

    ``torch.save`` into a file turns the ``OSError`` of a full disk into a ``RuntimeError`` of its
    zip writer (``unexpected pos ...``) that no longer says why; this keeps the reason.
    """

    def __init__(self, f: Any) -> None:
        self._f = f
        self.error: OSError | None = None

    def write(self, data: Any) -> int:
        try:
            return self._f.write(data)
        except OSError as err:
            self.error = self.error or err
            raise

    def flush(self) -> None:
        self._f.flush()


def append_line(path: str | os.PathLike, text: str) -> None:
    """Append ``text`` and a newline to ``path``, whole or not at all.

    A write that fails part-way (a full disk takes what fits, then refuses) cuts the file back to
    its length before. Should that fail too, or a killed writer have left a torn last line, the
    next row starts on a line of its own, and :func:`read_rows` skips the torn one.

    Raises:
        OSError: the write failed (the file is as it was, where it could be cut back).
    """
    data = (text + "\n").encode()
    with open(path, "a+b", buffering=0) as f:  # unbuffered: each write is one system call, its count exact
        start = f.seek(0, os.SEEK_END)
        if start:
            f.seek(start - 1)
            if f.read(1) != b"\n":
                data = b"\n" + data
        view = memoryview(data)
        try:
            while view:
                view = view[f.write(view):]
        except OSError:
            try:
                f.truncate(start)
            except OSError:
                pass  # the torn row stays; readers skip it
            raise


def read_rows(path: str | os.PathLike) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSON-lines file, one per line. Lines that do not parse (a row torn by
    a full disk or a killed writer) are skipped with one warning naming the file and how many."""
    torn = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                torn.append(number)
                continue
            yield row
    if torn:
        warnings.warn(f"{os.fspath(path)}: skipped {len(torn)} torn line(s) (line {', '.join(map(str, torn[:3]))}"
                      f"{', ...' if len(torn) > 3 else ''}): rows cut off by a failed or killed write",
                      RuntimeWarning, stacklevel=2)


class RunLog:
    """``metrics.jsonl`` and the TensorBoard events of a run folder, written after each iteration
    with the error policy of the module docstring.

    Args:
        log_dir: the run folder.
        last_checkpoint: the newest checkpoint this process wrote (named when the run must stop).
        tags: the TensorBoard tags a ``metrics.jsonl`` key is written under.
    """

    def __init__(self, log_dir: str | os.PathLike, last_checkpoint: Callable[[], Path | None] = lambda: None,
                 tags: Callable[[str], tuple[str, ...]] = lambda key: (key,)) -> None:
        self.log_dir = Path(log_dir)
        self._tags = tags
        self.metrics_path = self.log_dir / METRICS
        try:  # made here, once: a folder that vanishes later is reported, not quietly made again
            self.log_dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise RunWriteError("run folder", self.log_dir, err, "it cannot be made") from err
        self._last_checkpoint = last_checkpoint
        self._tensorboard: Any = None
        self._tensorboard_off = False
        self._metrics_warned = False
        self._missing_from: int | None = None  # first iteration of a gap in metrics.jsonl

    def write(self, iteration: int, total_steps: int, stats: dict[str, float]) -> None:
        """Log the iteration's scalars ``stats``: a row of ``metrics.jsonl`` (with ``iteration``,
        ``total_steps`` and the wall ``time``) and TensorBoard scalars at step ``iteration``.

        Raises:
            RunWriteError: the run folder is gone or no longer writable.
        """
        row = {"iteration": iteration, "total_steps": total_steps, "time": time.time(), **stats}
        try:
            append_line(self.metrics_path, json.dumps(row))
        except OSError as err:
            self._fatal_if_folder(err, iteration)
            if self._missing_from is None:
                self._missing_from = iteration
            if not self._metrics_warned:
                self._metrics_warned = True
                _warn(f"{self.metrics_path}: {describe(err)}; iteration {iteration} not logged, training goes on "
                      "(tried again each iteration; checkpoints are still written, and stop the run if they cannot be)")
        else:
            if self._missing_from is not None:
                _warn(f"{self.metrics_path}: written again from iteration {iteration}; iterations "
                      f"{self._missing_from}-{iteration - 1} are missing")
                self._missing_from = None
        self._write_tensorboard(iteration, stats)

    def _fatal_if_folder(self, err: OSError, iteration: int) -> None:
        if err.errno not in FOLDER_ERRNOS:
            return
        gone = not self.log_dir.is_dir()
        state = "it was removed or unmounted mid-run" if gone else "it is no longer writable"
        last = self._last_checkpoint()
        kept = "none written by this process" if last is None else f"{last}{'' if last.exists() else ' (gone with it)'}"
        raise RunWriteError("run folder", self.log_dir, err,
                            f"{state}; training stops at iteration {iteration}, the last checkpoint is {kept}") from err

    def _write_tensorboard(self, iteration: int, stats: dict[str, float]) -> None:
        if self._tensorboard_off:
            return
        try:
            if self._tensorboard is None:
                from torch.utils.tensorboard import SummaryWriter

                self._tensorboard = SummaryWriter(log_dir=str(self.log_dir))
                _write_in_this_thread(self._tensorboard)
            for key, value in stats.items():
                for tag in self._tags(key):
                    self._tensorboard.add_scalar(tag, value, iteration)
            self._tensorboard.flush()
        except OSError as err:
            self._tensorboard_off = True
            self.close()
            _warn(f"TensorBoard log in {self.log_dir}: {describe(err)}; TensorBoard logging stops for this run "
                  f"(from iteration {iteration}), {METRICS} and checkpoints go on")

    def close(self) -> None:
        """Flush and close the TensorBoard writer (a failing disk is not reported again)."""
        writer, self._tensorboard = self._tensorboard, None
        if writer is not None:
            try:
                writer.close()
            except OSError:
                pass


def _warn(message: str) -> None:
    warnings.warn(message, RuntimeWarning, stacklevel=4)


class _RecordsNow:
    """TensorBoard's event writer without its writer thread: each record is written when added."""

    def __init__(self, records: Any) -> None:
        self._records = records

    def write(self, data: bytes) -> None:
        self._records.write(data)

    def flush(self) -> None:
        self._records.flush()

    def close(self) -> None:
        self._records.flush()
        self._records.close()


def _write_in_this_thread(writer: Any) -> None:
    """Make a ``SummaryWriter`` write its records in the calling thread. Its own writer thread
    re-raises a failed write there (a traceback on stderr) and reports it here only at some later
    call; written here, a failure is seen at the iteration it happens. Where TensorBoard's
    internals differ from these, its thread stays."""
    event_writer = getattr(writer._get_file_writer(), "event_writer", None)
    pending = getattr(event_writer, "_async_writer", None)
    records, worker = getattr(pending, "_writer", None), getattr(pending, "_worker", None)
    if records is None or worker is None:
        return
    worker.stop()  # after what is queued: the file's header, written and flushed by SummaryWriter already
    event_writer._async_writer = _RecordsNow(records)
