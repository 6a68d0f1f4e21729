"""``package:<module>:<relative path>``: a file or directory shipped as package data by an installed plugin.

Model plugins accept it for ``[model] options.path`` (the shapes benchmark's pretrained pipelines:
``package:omni_rl_shapes:pretrained``), so an example config names a model without knowing where pip put it.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path, PurePosixPath

from omni_rl.errors import ConfigError

PREFIX = "package:"
_HINT = "use package:<installed package>:<path inside it>, e.g. package:omni_rl_shapes:pretrained"
_PACKAGE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def is_package_path(spec: str) -> bool:
    return spec.startswith(PREFIX)


def package_path(spec: str, what: str = "path") -> Path:
    """The filesystem path of ``spec``; a ConfigError naming the spec when it is malformed, the package or the
    path is missing, or the path would leave the package.

    The package is found without importing it (``importlib.util.find_spec`` of a top-level name reads no code):
    ``omni-rl check`` validating a config must not run whatever module the config names (``package:this:x``
    printed the Zen of Python, and a module with side effects would do worse). The path inside is a relative
    path that stays inside the package: no absolute path, no ``..``, no symlink out of it.
    """
    parts = spec.split(":", 2)
    if len(parts) != 3 or not parts[2]:
        raise ConfigError(f"cannot resolve {what} {spec!r}: expected package:<package>:<path>", hint=_HINT)
    _, package, relative = parts
    if not _PACKAGE.match(package):
        raise ConfigError(
            f"cannot resolve {what} {spec!r}: {package!r} is not the name of a top-level package", hint=_HINT
        )
    inside = PurePosixPath(relative.replace("\\", "/"))
    if inside.is_absolute() or relative.startswith(("/", "\\")) or ".." in inside.parts or ":" in relative:
        raise ConfigError(
            f"cannot resolve {what} {spec!r}: the path inside the package must be relative, without '..'",
            hint=_HINT,
        )
    base = _package_directory(package, spec, what)
    path = base.joinpath(*inside.parts)
    if not path.resolve().is_relative_to(base.resolve()):
        raise ConfigError(f"{what} {spec!r} resolves to {path.resolve()}, outside package {package!r}", hint=_HINT)
    if not path.exists():
        raise ConfigError(f"{what} {spec!r} resolves to {path}, which does not exist", hint=_HINT)
    return path


def _package_directory(package: str, spec: str, what: str) -> Path:
    """The directory of an installed package, found without running its code."""
    try:
        found = importlib.util.find_spec(package)
    except (ImportError, ValueError) as error:
        found, reason = None, f"{type(error).__name__}: {error}"
    else:
        reason = f"no installed package named {package!r}"
    if found is None:
        raise ConfigError(f"cannot resolve {what} {spec!r}: {reason}", hint=_HINT)
    locations = list(found.submodule_search_locations or [])
    if not locations:
        raise ConfigError(
            f"cannot resolve {what} {spec!r}: {package!r} is a module, not a package that ships files", hint=_HINT
        )
    return Path(locations[0])
