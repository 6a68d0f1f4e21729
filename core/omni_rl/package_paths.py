"""``package:<module>:<relative path>``: a file or directory shipped as package data by an installed plugin.

Model plugins accept it for ``[model] options.path`` (the shapes benchmark's pretrained pipelines:
``package:omni_rl_shapes:pretrained``), so an example config names a model without knowing where pip put it.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from omni_rl.errors import ConfigError

PREFIX = "package:"


def is_package_path(spec: str) -> bool:
    return spec.startswith(PREFIX)


def package_path(spec: str, what: str = "path") -> Path:
    """The filesystem path of ``spec``; a ConfigError naming the spec when the module or the path is missing."""
    hint = "use package:<installed module>:<path inside it>, e.g. package:omni_rl_shapes:pretrained"
    try:
        _, module, relative = spec.split(":", 2)
        path = Path(str(resources.files(module).joinpath(relative)))
    except (ValueError, ModuleNotFoundError, TypeError) as error:
        raise ConfigError(f"cannot resolve {what} {spec!r}: {error}", hint=hint) from None
    if not path.exists():
        raise ConfigError(f"{what} {spec!r} resolves to {path}, which does not exist", hint=hint)
    return path
