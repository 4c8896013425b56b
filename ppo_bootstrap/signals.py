"""Stopping training on SIGINT / SIGTERM: the first signal asks the Runner to stop after the
iteration in progress (it saves and says how to resume), a second one exits at once with one line
naming the last checkpoint (:class:`StopOnSignal`)."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import signal
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


class StopOnSignal:
    """Turns the first SIGINT / SIGTERM during training into a request to stop; a second one exits at once.

    :meth:`training` (what ``Runner.learn`` enters) installs the handlers: the first signal sets
    :attr:`requested`, the Runner stops after the iteration, saves and prints :meth:`resume_lines`.
    A second signal writes one line naming the last checkpoint to stderr and raises
    ``SystemExit(128 + signum)``: no traceback, and a write in progress removes its temporary on the
    way out. Entered as a context manager around more than training (an app's training, export and
    evaluation), the handlers stay for all of it, and a signal after training exits the same way:
    there is nothing left to stop gently. Re-entrant: the handlers go back to the previous ones
    when the outermost scope ends.

    Libraries may replace the handler, in Python or in native code (where Python never hears of it);
    :meth:`reassert`, once per iteration, installs it again and warns once per signal naming the
    replacement.

    Attributes:
        resume_hint: ``checkpoint path -> how to resume from it`` (a command line, say), printed
            after a stop; ``None`` names ``Runner.load``.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, last_checkpoint: Callable[[], Path | None] = lambda: None,
                 resume_hint: Callable[[Path], str] | None = None) -> None:
        self.requested = False
        self.signal_name = ""
        self.resume_hint = resume_hint
        self._training = False
        self._depth = 0
        self._last_checkpoint = last_checkpoint
        self._previous: dict[int, Any] = {}
        self._native: dict[int, int | None] = {}  # the C-level handler behind ours, where readable
        self._warned: set[int] = set()

    def _handle(self, signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        if self.requested or not self._training:  # a second signal, or one after training: stop now
            last = self._last_checkpoint() or "none written by this process"
            what = f"second {name}" if self.requested else f"{name} after training"
            os.write(2, f"{what}: stopping at once; the last checkpoint is {last}\n".encode())  # no buffered I/O in a handler
            raise SystemExit(128 + signum)
        self.requested = True
        self.signal_name = name

    def resume_lines(self) -> str:
        """What a stopped run prints: the checkpoint it wrote last and how to resume from it."""
        last = self._last_checkpoint()
        if last is None:
            return "no checkpoint written (log_dir is None): nothing to resume from"
        hint = self.resume_hint(last) if self.resume_hint else f"Runner.load({os.fspath(last)!r}), then learn()"
        return f"checkpoint: {last}\nto resume: {hint}"

    def _install(self, sig: int) -> Any:
        previous = signal.signal(sig, self._handle)
        self._native[sig] = _native_handler(sig)
        return previous

    def __enter__(self) -> "StopOnSignal":
        self._depth += 1
        if self._depth == 1 and threading.current_thread() is threading.main_thread():  # handlers live there only
            for sig in self.SIGNALS:
                self._previous[sig] = self._install(sig)
        return self

    @contextlib.contextmanager
    def training(self) -> Iterator["StopOnSignal"]:
        """The scope of one ``learn`` call: a first signal in it asks to stop (:attr:`requested`)."""
        self.requested, self.signal_name, self._training = False, "", True
        try:
            with self:
                yield self
        finally:
            self._training = False

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
        self._depth -= 1
        if self._depth == 0:
            for sig, handler in self._previous.items():
                signal.signal(sig, handler)
            self._previous.clear()


_StopOnSignal = StopOnSignal  # the name before it was public


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
