"""Progress of long loops (rendering a clip, an evaluation rollout, a threshold sweep).

Every long-running library function takes one ``progress`` argument (:data:`Progress`):

* ``False``: silent (the library default where output is not asked for);
* ``None``: a bar on stderr when stderr is a terminal, silent when it is piped or logged;
* ``True``: a bar on stderr always (a CLI flag such as ``--progress``);
* a callable ``(done, total) -> None``: called after every unit of work, for a caller's own display
  (``total`` is None where the amount of work is not known in advance).

The bar is ``tqdm``'s when it is installed (the ``eval`` extra), else a one-line ``\\r`` counter.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

ProgressCallback = Callable[[int, int | None], None]
"""``(done, total)``, called after each unit of work."""
Progress = bool | None | ProgressCallback


class _LineBar:
    """``desc: done/total`` rewritten in place on ``file``, at most every ``interval`` seconds."""

    def __init__(self, total: int | None, desc: str, unit: str, file: TextIO, interval: float = 0.5) -> None:
        self.total, self.desc, self.unit, self.file, self.interval = total, desc, unit, file, interval
        self.done = 0
        self.start = self.last = time.monotonic()
        self._write()

    def _write(self, end: str = "") -> None:
        elapsed = time.monotonic() - self.start
        total = "?" if self.total is None else self.total
        self.file.write(f"\r{self.desc}: {self.done}/{total} {self.unit}s [{elapsed:.0f} s]{end}")
        self.file.flush()

    def update(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if now - self.last >= self.interval or self.done == self.total:
            self.last = now
            self._write()

    def close(self) -> None:
        self._write("\n")


class ProgressReporter:
    """Reports ``total`` units of work (None: not known) as :data:`Progress` asks; use as a context manager.

    Example::

        with ProgressReporter(len(states), "render", progress, unit="frame") as bar:
            for state in states:
                ...
                bar.update()
    """

    def __init__(self, total: int | None, desc: str, progress: Progress = False, unit: str = "step") -> None:
        self.total = total
        self.done = 0
        self._callback: ProgressCallback | None = progress if callable(progress) else None
        self._bar = None
        show = sys.stderr.isatty() if progress is None else progress is True
        if show:
            try:
                from tqdm import tqdm
            except ImportError:  # tqdm comes with the eval extra; the plain line needs nothing
                self._bar = _LineBar(total, desc, unit, sys.stderr)
            else:
                self._bar = tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True,
                                 mininterval=0.5)

    def update(self, n: int = 1) -> None:
        """Count ``n`` more units done."""
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
        if self._callback is not None:
            self._callback(self.done, self.total)

    def close(self) -> None:
        """End the bar's line (a loop that stops early leaves it at the count reached)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> ProgressReporter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
