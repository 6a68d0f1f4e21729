"""The paths of omni-rl-sd3 0.1.0 whose code moved to omni-rl-pipelines, kept importable for one release.

FLUX, Qwen-Image and Wan used to import the shared diffusers kit from this plugin; it is now the library
``omni_rl_pipelines``. A moved module's old path (``omni_rl_sd3.lora``) is the new module itself under a second
name (one module object, so patches and ``isinstance`` checks agree), and a moved name of a module that stays
(``omni_rl_sd3.tiny.TINY_MARKER``) is the new object; both warn once with a DeprecationWarning naming the new
path. Both go in omni-rl 0.2.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Mapping
from typing import Any

#: moved module of omni-rl-sd3 -> its home in omni-rl-pipelines
MOVED_MODULES: dict[str, str] = {
    f"omni_rl_sd3.{name}": f"omni_rl_pipelines.{name}"
    for name in (
        "compat",
        "cuda_graphs",
        "lora",
        "packed_latents",
        "pipeline_model",
        "prompt_cache",
        "speed",
        "testing",
        "tiny_tokenizers",
    )
}


def _warn(old: str, new: str) -> None:
    warnings.warn(
        f"{old} moved to {new} (the omni-rl-pipelines library): import it from there (the old path is removed in "
        "omni-rl 0.2)",
        DeprecationWarning,
        stacklevel=4,
    )


def alias_module(old: str) -> None:
    """Make module ``old`` (being imported) the module it moved to, with a warning; called by its stub."""
    new = MOVED_MODULES[old]
    _warn(old, new)
    sys.modules[old] = importlib.import_module(new)


def moved_name(module: str, name: str, moved: Mapping[str, str]) -> Any:
    """The module-level ``__getattr__`` of a module some of whose names moved: ``moved`` maps a name to the module
    it lives in now; other names raise AttributeError as usual."""
    if name not in moved:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    _warn(f"{module}.{name}", f"{moved[name]}.{name}")
    return getattr(importlib.import_module(moved[name]), name)
