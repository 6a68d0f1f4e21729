"""The workers' logs as the driver prints them, minus Ray's report of an actor's failed constructor.

When a policy worker or a reward actor raises while it is built (a wrong model path, an unset API-key variable),
the actor's process logs Ray's whole creation-task traceback (thirty lines with ``^^^`` markers and colour codes)
and Ray forwards it to the driver's console. The driver already prints the cause as one line with its hint
(omni_rl.runtime.faults.startup_error); this filter drops the duplicate and everything that process logs after it (it
has
died). Every other worker line passes through unchanged.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

#: how the dying actor's log block starts (Ray's wording, printed by the worker process itself)
CREATION_FAILURE = "Exception raised in creation task"
#: the name under which ``ray.init(log_to_driver=True)`` registers the handler that prints the workers' lines
_RAY_HANDLER = "ray_print_logs"


class DropCreationFailures:
    """Wraps Ray's printing handler: a batch of log lines from a process whose constructor failed is cut at
    :data:`CREATION_FAILURE`, and later batches of that process are dropped."""

    def __init__(self, handler: Callable[[dict[str, Any]], None]) -> None:
        self.handler = handler
        self.failed: set[Any] = set()

    def __call__(self, data: dict[str, Any]) -> None:
        key = (data.get("ip"), data.get("pid"))
        if key in self.failed:
            return
        lines = list(data.get("lines") or [])
        for i, line in enumerate(lines):
            if CREATION_FAILURE in line:
                self.failed.add(key)
                lines = lines[:i]
                break
        if lines:
            self.handler({**data, "lines": lines})


def filter_worker_logs() -> bool:
    """Install :class:`DropCreationFailures` around Ray's printing handler (call after ``ray.init``); False when
    this Ray does not have it where expected (its logs are then printed as Ray prints them)."""
    try:
        from ray._private.ray_logging import global_worker_stdstream_dispatcher as dispatcher
    except ImportError:
        return False
    with dispatcher._lock:
        handlers = list(dispatcher.handlers)
        for i, (name, handler) in enumerate(handlers):
            if name == _RAY_HANDLER and not isinstance(handler, DropCreationFailures):
                handlers[i] = (name, DropCreationFailures(handler))
                dispatcher.handlers = handlers
                return True
    return False


def plain_prefixes() -> bool:
    """Ray colours each forwarded worker line's ``(PolicyWorker pid=...)`` prefix with ANSI escapes unless
    ``RAY_COLOR_PREFIX=0`` (read when it prints, in the driver), also under ``NO_COLOR`` and into a log file, where
    omni-rl's own lines carry none. Set it so when ``NO_COLOR`` is set (https://no-color.org) or stdout is not a
    terminal, unless ``FORCE_COLOR`` asks for colour; a user's own ``RAY_COLOR_PREFIX`` wins. True when set here."""
    if "RAY_COLOR_PREFIX" in os.environ:
        return False
    no_color = bool(os.environ.get("NO_COLOR"))
    terminal = sys.stdout is not None and sys.stdout.isatty()
    if no_color or (not terminal and not os.environ.get("FORCE_COLOR")):
        os.environ["RAY_COLOR_PREFIX"] = "0"
        return True
    return False
