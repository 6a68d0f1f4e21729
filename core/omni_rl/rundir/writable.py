"""Can omni-rl write where the user pointed it? Asked before any work starts, answered as a usage error (exit 2).

Without these checks a path that is a file, or a directory without write permission, surfaced as a raw
``OSError`` from deep inside (``mkdir``, matplotlib's ``savefig``, safetensors), exit 1 and, for a run, after Ray
and the model had started. Each function returns nothing or raises a :class:`~omni_rl.errors.ConfigError` naming
``where`` (a config path like ``$.run.output_dir``, or an option like ``--out``).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from omni_rl.errors import ConfigError


def _nearest_existing(path: Path) -> Path:
    """``path`` or its closest ancestor that exists (where a ``mkdir -p`` would start)."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path(".")


def writable_directory(path: str | Path, where: str) -> None:
    """``path`` is a directory omni-rl may create (its nearest existing ancestor is a writable directory) or a
    writable directory already."""
    path = Path(path).expanduser()
    existing = _nearest_existing(path)
    if not existing.is_dir():
        raise ConfigError(
            f"{str(path)!r} cannot be a directory: {str(existing)!r} is a file @ {where}",
            hint="choose a directory path (a new one is created)",
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(
            f"cannot write in {str(existing)!r} (permission denied), so {str(path)!r} cannot be written @ {where}",
            hint="choose a directory you can write to",
        )
    _probe(existing, path, where)


def _probe(existing: Path, path: Path, where: str) -> None:
    """Create (and remove) an empty directory in ``existing``: ``os.access`` says yes for root everywhere, and for
    anyone on a read-only mount or a kernel filesystem such as ``/proc``, where ``mkdir`` then fails (ENOENT,
    EROFS, EPERM) as a raw exception after the work started."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".omni-rl-write-check-", dir=existing))
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConfigError(
            f"cannot create directories in {str(existing)!r} ({reason}), so {str(path)!r} cannot be written @ {where}",
            hint="choose a directory on a writable filesystem (not under /proc or /sys, not a read-only mount)",
        ) from None


def writable_file(path: str | Path, where: str, example: str = "out.png") -> None:
    """``path`` names a file omni-rl may create or replace: not a directory, in a directory it can write."""
    path = Path(path).expanduser()
    if path.is_dir():
        raise ConfigError(
            f"{str(path)!r} is a directory; {where} takes a file name @ {where}",
            hint=f"e.g. {where} {path / example}",
        )
    if path.exists() and not os.access(path, os.W_OK):
        raise ConfigError(f"cannot overwrite {str(path)!r} (permission denied) @ {where}", hint="choose another file")
    writable_directory(path.parent, where)
