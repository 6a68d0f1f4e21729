"""SIGINT / SIGTERM while the servers start: stop waiting, stop them, and end the run as interrupted.

A judge's start can take minutes (a 7B model from a cold disk). The run's own handler only notes a first signal
and lets the current step finish, so a signal during the start would wait for the servers to be ready first.
While :class:`SignalWatch` is active (in the main thread only, where handlers can be set), a signal also sets
its ``event`` for the waiting loop, then goes on to the handler that was there before (the run's, which prints
its line and, for a second signal, exits at once), so the run's behaviour is unchanged except that the wait ends.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType, TracebackType
from typing import Any

from omni_rl.errors import Interrupted

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class SignalWatch:
    """A context manager: ``event`` is set by SIGINT / SIGTERM while inside (see the module docstring)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> SignalWatch:
        if threading.current_thread() is threading.main_thread():
            for signum in _SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.signum = signum
        self.event.set()
        previous = self._previous.get(signum)
        if callable(previous):
            previous(signum, frame)  # the run's handler (or Python's KeyboardInterrupt for a bare Ctrl-C)

    def error(self, what: str) -> Interrupted:
        """The run's end: exit 130 (SIGINT) or 143 (SIGTERM), nothing trained."""
        name = signal.Signals(self.signum or signal.SIGINT).name
        error = Interrupted(f"interrupted ({name}) while {what} started; nothing was trained", hint="run it again")
        error.exit_code = 128 + int(self.signum or signal.SIGINT)
        return error
