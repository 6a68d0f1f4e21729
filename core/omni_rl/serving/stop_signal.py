"""SIGTERM for a long-running command that has no step to finish (``serve-reward``): stop as Ctrl-C does.

Without it SIGTERM met Ray's own handler (installed by ``ray.init``): a crash dump, an abort, and the embedded
cluster's processes (a dashboard agent listening on every interface among them) left running until they noticed.
Raising :class:`Terminated` in the main thread instead runs the command's ``finally`` (servers removed, Ray shut
down). Further signals during that cleanup are ignored, so it completes; the exit code is 143 (128 + SIGTERM).
"""

from __future__ import annotations

import signal
import threading
from typing import Any

from omni_rl.errors import OmniRLError


class Terminated(OmniRLError):
    """Stopped by SIGTERM after a clean shutdown (exit code 143)."""

    exit_code = 143


class StopOnSigterm:
    """``with StopOnSigterm():`` a SIGTERM raises :class:`Terminated` once; later ones are ignored."""

    def __init__(self) -> None:
        self._previous: Any = None
        self._installed = False
        self._raised = False

    def __enter__(self) -> StopOnSigterm:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._handle)
            self._installed = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._installed:
            signal.signal(signal.SIGTERM, self._previous)

    def _handle(self, signum: int, frame: Any) -> None:
        if self._raised:
            return
        self._raised = True
        raise Terminated("stopped by SIGTERM; the servers were shut down")
