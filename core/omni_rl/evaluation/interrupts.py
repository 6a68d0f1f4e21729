"""Ctrl-C and SIGTERM during ``omni-rl eval``: stop now, keep what was scored, say how to resume.

An evaluation has no step to finish: every prompt's images and verdicts are appended to ``results.jsonl`` as soon
as the prompt is scored, and a rerun of the same command resumes at the first prompt without results (a torn last
line is ignored). So the first signal stops at once with the command that resumes, exit 143 for SIGTERM (a
scheduler's preemption; it killed the evaluation silently, exit -15) and 130 for Ctrl-C. A second signal, while
the first one's exit is under way (libraries' atexit callbacks run then), exits immediately: before, a double
Ctrl-C printed a KeyboardInterrupt traceback from one of those callbacks.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from rich.console import Console
from rich.text import Text

from omni_rl.errors import Interrupted

#: the signals handled, and how messages name them
SIGNAL_NAMES = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}


class StopOnSignal:
    """``with StopOnSignal(console, resume):`` an evaluation. The first SIGINT / SIGTERM raises
    :class:`~omni_rl.errors.Interrupted` (exit 128 + the signal) whose hint is ``resume()``, the command that
    continues; the handlers then stay installed until the process ends, so a second signal exits at once with one
    line and no traceback. Main thread only (elsewhere it does nothing)."""

    def __init__(self, console: Console, resume: Callable[[], str]) -> None:
        self.console = console
        self.resume = resume
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopOnSignal:
        if threading.current_thread() is threading.main_thread():
            for signum in SIGNAL_NAMES:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.signum is not None:
            return  # the process is ending for a signal: a second one must still exit quietly
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        name = SIGNAL_NAMES.get(signum, "signal")
        if self.signum is not None:
            line = Text(f"second {name}: exiting now; resume with: {self.resume()}", style="red")
            self.console.print(line, soft_wrap=True)
            os._exit(128 + signum)
        self.signum = signum
        error = Interrupted(
            f"interrupted ({name}); the images scored so far are kept",
            hint=f"resume with: {self.resume()}",
        )
        error.exit_code = 128 + signum
        raise error
