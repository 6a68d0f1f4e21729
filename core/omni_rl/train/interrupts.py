"""Ctrl-C and SIGTERM during training: finish the step, checkpoint it, say how to resume.

SIGTERM is what a scheduler sends before it kills (Slurm preemption, Kubernetes eviction, ``docker stop``),
usually with a grace period; treated like Ctrl-C, it ends the run with a checkpoint of the current step and the
resume command, exit 143 (128 + 15) instead of 130 (128 + 2). A second signal exits at once, still printing
where the last complete checkpoint is and how to resume: that is the line a user looks for after pressing
Ctrl-C twice.

Exiting at once is safe: checkpoints appear by rename and the ``latest`` pointer by atomic replace, so the worst
case is an abandoned staging directory that the next checkpoint removes.

The guard is installed before Ray starts, and Ray is kept from replacing it (omni_rl.runtime.ray_signals): a signal
while Ray starts stops the run as soon as Ray is up (exit 143 / 130, nothing trained), not with Ray's silent
``exit 15``.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.markup import escape

from omni_rl.errors import Interrupted

#: the signals handled, and how messages name them
SIGNAL_NAMES = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}
#: what the first signal does, as its line says: during training, and while Ray starts
FINISH_THE_STEP = "finishing this step and writing a checkpoint"
STOP_AFTER_RAY_STARTS = "stopping as soon as Ray has started (nothing was trained yet)"


class InterruptGuard:
    """First SIGINT or SIGTERM: ``requested`` (the loop finishes the step, checkpoints, stops). Second: exit now,
    with ``last_checkpoint()``'s line (where the last complete checkpoint is, and the resume command) printed.
    Installed only in the main thread (signal handlers can be set nowhere else), before ``ray.init``, which is kept
    from installing its own SIGTERM handlers (omni_rl.runtime.ray_signals). ``doing`` is what the first signal's
    line says will happen. The previous handlers are restored on exit, unless a signal is being handled."""

    def __init__(
        self,
        console: Console,
        last_checkpoint: Callable[[], str | None] = lambda: None,
        doing: str = FINISH_THE_STEP,
    ) -> None:
        self.console = console
        self.last_checkpoint = last_checkpoint
        self.doing = doing
        self.requested = False
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    @property
    def exit_code(self) -> int:
        """128 + the signal: 130 for Ctrl-C, 143 for SIGTERM."""
        return 128 + int(self.signum or signal.SIGINT)

    @property
    def name(self) -> str:
        return SIGNAL_NAMES.get(self.signum or signal.SIGINT, "signal")

    def stopped_before_training(self) -> Interrupted:
        """The error ending a run whose signal came before training began (while Ray started): exit 143 / 130."""
        error = Interrupted(
            f"interrupted ({self.name}) while Ray was starting; nothing was trained",
            hint="run the same command again to start the run",
        )
        error.exit_code = self.exit_code
        return error

    def __enter__(self) -> InterruptGuard:
        if threading.current_thread() is threading.main_thread():
            for signum in SIGNAL_NAMES:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.requested:
            # the run is stopping for a signal: keep handling them through Ray's shutdown, which follows, so that
            # a second Ctrl-C there still prints where the checkpoint is (the process ends right after)
            return
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested:
            self.console.print(f"[red]second {escape(SIGNAL_NAMES.get(signum, 'signal'))}: exiting now[/]")
            try:
                where = self.last_checkpoint()
            except Exception:  # exiting anyway: the line is a courtesy
                where = None
            if where:
                self.console.print(escape(where), soft_wrap=True)
            os._exit(self.exit_code)
        self.requested = True
        self.signum = signum
        again = "Ctrl-C" if signum == signal.SIGINT else "signal"
        # one line, also in a log file (rich would fold it at 80 columns there)
        self.console.print(f"[yellow]{self.name}: {escape(self.doing)} ({again} again to quit now)[/]", soft_wrap=True)
