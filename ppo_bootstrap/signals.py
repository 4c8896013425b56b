"""Stopping training on SIGINT / SIGTERM: the first signal asks the Runner to stop after the
iteration in progress, a second one exits at once with one line naming the last checkpoint."""

from __future__ import annotations

import ctypes
import functools
import os
import signal
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any


class _StopOnSignal:
    """Turns the first SIGINT / SIGTERM into a request to stop; a second one exits at once.

    The second signal writes one line naming the last checkpoint to stderr and raises
    ``SystemExit(128 + signum)``: no traceback, and a checkpoint write in progress removes its
    temporary on the way out. Libraries may replace the handler, in Python or in native code (where
    Python never hears of it); :meth:`reassert`, once per iteration, installs it again and warns once
    per signal naming the replacement. The previous handlers come back on exit.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, last_checkpoint: Callable[[], Path | None] = lambda: None) -> None:
        self.requested = False
        self.signal_name = ""
        self._last_checkpoint = last_checkpoint
        self._previous: dict[int, Any] = {}
        self._native: dict[int, int | None] = {}  # the C-level handler behind ours, where readable
        self._warned: set[int] = set()

    def _handle(self, signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        if self.requested:  # a second signal: stop now
            last = self._last_checkpoint() or "none written by this process"
            os.write(2, f"second {name}: stopping at once; the last checkpoint is {last}\n".encode())  # no buffered I/O in a handler
            raise SystemExit(128 + signum)
        self.requested = True
        self.signal_name = name

    def _install(self, sig: int) -> Any:
        previous = signal.signal(sig, self._handle)
        self._native[sig] = _native_handler(sig)
        return previous

    def __enter__(self) -> "_StopOnSignal":
        if threading.current_thread() is threading.main_thread():  # handlers can only live there
            for sig in self.SIGNALS:
                self._previous[sig] = self._install(sig)
        return self

    def reassert(self) -> None:
        """Install the handler again where a library replaced it; warn once per signal, naming the replacement."""
        for sig in self._previous:
            current, native = signal.getsignal(sig), self._native[sig]
            if current != self._handle:
                replaced_by = _handler_name(current)
            elif native is None:  # the C level cannot be read here: install again, unseen
                replaced_by = None
            elif _native_handler(sig) != native:
                replaced_by = "native code (a handler installed outside Python)"
            else:
                continue
            self._install(sig)
            if replaced_by is not None and sig not in self._warned:
                self._warned.add(sig)
                warnings.warn(f"the {signal.Signals(sig).name} handler was replaced by {replaced_by}; the Runner "
                              "installed its own again, so a stop request still ends training after the iteration",
                              RuntimeWarning, stacklevel=3)

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def _handler_name(handler: Any) -> str:
    if handler is None:
        return "native code (a handler installed outside Python)"
    if isinstance(handler, signal.Handlers):
        return handler.name
    return f"{getattr(handler, '__module__', '?')}.{getattr(handler, '__qualname__', repr(handler))}"


@functools.cache
def _libc() -> Any:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.sigaction.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
    return libc


def _native_handler(signum: int) -> int | None:
    """The address of the process's C-level handler for ``signum`` (libc ``sigaction``; the handler
    is the first field of ``struct sigaction`` on Linux and macOS), or ``None`` where unreadable."""
    try:
        buf = ctypes.create_string_buffer(512)  # larger than any struct sigaction
        if _libc().sigaction(signum, None, buf) != 0:
            return None
    except (OSError, AttributeError, TypeError):
        return None
    return ctypes.c_void_p.from_buffer(buf).value or 0
