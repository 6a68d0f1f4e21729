"""User-facing errors.

Every failure a user can cause (bad config, missing plugin, conflicting plugins, bad data) raises an
``OmniRLError`` subclass carrying a ``hint`` that says how to fix it. The CLI prints ``message`` and ``hint``
without a traceback (unless ``--debug``) and maps the class to an exit code.
"""

from __future__ import annotations


class OmniRLError(Exception):
    """Base class for errors a user can act on."""

    exit_code: int = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message}\nhint: {self.hint}"
        return self.message


class ConfigError(OmniRLError):
    """The config file or ``--set`` overrides are invalid (exit code 2)."""

    exit_code = 2


class PluginError(OmniRLError):
    """Plugins conflict, are missing, or a component name is unknown (exit code 2)."""

    exit_code = 2


class RuntimeFailure(OmniRLError):
    """Training failed at run time for a reason the user can act on (exit code 1)."""

    exit_code = 1


class Interrupted(OmniRLError):
    """The user interrupted the run (SIGINT); a checkpoint was written (exit code 130)."""

    exit_code = 130


class CheckpointDamaged(OmniRLError):
    """A checkpoint file does not match the manifest written with it (exit code 2: choose another checkpoint).

    ``checkpoint`` is the checkpoint directory and ``file`` the damaged file relative to it. Both are keywords with
    defaults so that the error survives pickling across a Ray actor boundary (``cls(message)``, then its attributes).
    """

    exit_code = 2

    def __init__(self, message: str, hint: str | None = None, *, checkpoint: str = "", file: str = "") -> None:
        super().__init__(message, hint)
        self.checkpoint = checkpoint
        self.file = file


def describe_exception(exc: BaseException) -> str:
    """One line naming the exception type and its message (the first line of it): how a plugin's or a
    component's failure is reported (``omni-rl plugins``' error column, a failing advantage, a damaged export)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
