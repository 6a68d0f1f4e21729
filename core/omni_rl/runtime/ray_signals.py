"""The driver's SIGTERM / SIGINT handlers kept through Ray's start-up and shutdown.

Three things Ray does to a driver's signal handling, each of which made a signal kill omni-rl without a word:

- ``ray.init`` installs SIGTERM handlers of its own (``sys.exit(15)``, then the node's "kill every Ray process,
  exit 1"), so a SIGTERM during the seconds Ray takes to start ended the run with exit 15 and no message, leaving
  the session folder behind;
- Ray's core worker installs a C-level failure handler for SIGTERM when it connects (a crash dump, then death),
  behind Python's back: ``signal.getsignal`` still names the Python handler, which no longer runs;
- ``ray.shutdown`` restores the C-level default action for SIGTERM, again behind Python's back, so a second SIGTERM
  after a run's last checkpoint (during the shutdown that follows) killed the driver silently (exit -15).

:func:`init_keeping_handlers` wraps ``ray.init`` so that a Python SIGTERM handler installed before it (the run's
InterruptGuard) stays the one that runs, and :func:`rearm` re-installs the current Python handlers at the C level
after Ray's start-up or shutdown. Without a Python handler of ours in place (the default action), Ray's own are
left alone.
"""

from __future__ import annotations

import contextlib
import functools
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])
#: the signals whose Python handlers are kept and re-armed
SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _has_python_handler(signum: int) -> bool:
    return callable(signal.getsignal(signum))


def rearm() -> None:
    """Install each of :data:`SIGNALS`' current Python handlers again, which re-points the C-level action at
    Python's (after Ray replaced or reset it). Main thread only; elsewhere (and for default actions) nothing."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in SIGNALS:
        handler = signal.getsignal(signum)
        if callable(handler):
            signal.signal(signum, handler)


@contextlib.contextmanager
def _ray_sigterm_handlers_ignored() -> Iterator[None]:
    """Within the block, Ray's ``set_sigterm_handler`` (its only way of installing its SIGTERM handlers) does
    nothing; a Ray without it is left as it is."""
    try:
        import ray._private.utils as ray_utils
    except ImportError:
        yield
        return
    original = getattr(ray_utils, "set_sigterm_handler", None)
    if original is None:
        yield
        return
    ray_utils.set_sigterm_handler = lambda handler: None
    try:
        yield
    finally:
        ray_utils.set_sigterm_handler = original


def init_keeping_handlers(init: F) -> F:
    """``init`` (``ray.init``) run so that a Python SIGTERM handler installed before it is still the one that runs
    afterwards, and during it (see the module docstring)."""

    @functools.wraps(init)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is not threading.main_thread() or not _has_python_handler(signal.SIGTERM):
            return init(*args, **kwargs)
        try:
            with _ray_sigterm_handlers_ignored():
                return init(*args, **kwargs)
        finally:
            rearm()  # the core worker's C-level SIGTERM handler, installed when it connected, replaced again

    return wrapped  # type: ignore[return-value]
