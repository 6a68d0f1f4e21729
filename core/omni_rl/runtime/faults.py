"""Errors from Ray actors as one readable line: the remote exception itself, not Ray's wrapper.

A failed actor call arrives as ``RayTaskError(<cause>)`` whose text starts with a coloured
``ray::PolicyWorker.load_state() (pid=…, actor_id=…)`` header and ends with the remote traceback. Users get the
cause's type and first line instead, with the component and the operation named by the caller (the worker group,
the rewards); Ray's header, actor ids and ANSI escapes appear only under ``--debug`` (the traceback).
"""

from __future__ import annotations

import re

from omni_rl.errors import OmniRLError, RuntimeFailure

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
#: ``ray::PolicyWorker.load_state() (pid=123, ip=10.0.0.1, actor_id=ab12…, repr=<…>)`` and its bare variants
_RAY_HEADER = re.compile(r"ray::[\w.]+\(\)\s*(\([^()]*(?:\([^()]*\)[^()]*)*\))?:?\s*")
_ACTOR_IDS = re.compile(r"\s*\((?:pid=\d+[^()]*|actor_id=[0-9a-f]+[^()]*)\)")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def strip_actor_ids(text: str) -> str:
    """Without Ray's ``ray::Class.method()`` headers and ``(pid=…, actor_id=…)`` reprs."""
    return _ACTOR_IDS.sub("", _RAY_HEADER.sub("", text))


def remote_cause(exc: BaseException) -> BaseException:
    """The exception raised inside the actor (through any number of Ray wrappers), else ``exc`` itself."""
    seen = 0
    while seen < 8 and type(exc).__name__.startswith("RayTaskError") and getattr(exc, "cause", None) is not None:
        exc = exc.cause  # type: ignore[attr-defined]
        seen += 1
    return exc


def clean_line(text: str) -> str:
    """One line without ANSI escapes, Ray's task header or actor ids."""
    text = strip_actor_ids(strip_ansi(text))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else ""


def describe_remote(exc: BaseException) -> str:
    """``TypeName: first line of the message`` of the exception an actor raised."""
    cause = remote_cause(exc)
    name = type(cause).__name__
    if name.startswith("RayTaskError(") and name.endswith(")"):
        name = name[len("RayTaskError(") : -1]
    line = clean_line(str(cause))
    return f"{name}: {line}" if line else name


def creation_cause(exc: BaseException) -> BaseException | None:
    """The exception an actor's constructor raised, when ``exc`` says the actor died of it; else None.

    Ray reports such a death as an ``ActorDiedError`` flagged ``actor_init_failed`` whose only argument is the
    creation task's ``RayTaskError``; its text is Ray's (a traceback with ``^^^`` markers), so the cause is
    taken from the argument."""
    if not getattr(exc, "_actor_init_failed", False):
        return None
    for arg in exc.args:
        if isinstance(arg, BaseException):
            return remote_cause(arg)
    return None


def startup_error(exc: BaseException, who: str) -> OmniRLError | None:
    """``who`` (``policy worker 0``, ``reward actor 'ocr'``) failed in its constructor: the error to raise, as one
    line. An omni-rl error keeps its class (a ConfigError exits 2), attributes and hint, with ``who`` in front of
    its message; any other exception becomes a RuntimeFailure naming its type. None when ``exc`` is not a
    constructor's failure (a worker that died later, of memory or a lost node)."""
    cause = creation_cause(exc)
    if cause is None:
        return None
    if isinstance(cause, OmniRLError):
        cause.message = f"{who} failed while starting: {cause.message}"
        cause.args = (cause.message,)
        return cause
    return RuntimeFailure(
        f"{who} failed while starting: {describe_remote(cause)}",
        hint="the error was raised while building it from the config; rerun with --debug for its traceback",
    )
