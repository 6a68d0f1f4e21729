"""omni-rl: RL fine-tuning of text-to-image flow-matching models, extended by plugins.

The Python API for notebooks, tests and plugin authors::

    from omni_rl import hookimpl, LossSpec          # writing a plugin
    from omni_rl import get_registry, build, load_config

    registry = get_registry()                        # every installed plugin, collected once
    loss = build("loss", "flow_grpo", {"clip_ratio": 1e-4})
    config = load_config("config.toml", ["optim.lr=3e-4"])

Importing this package is cheap (attrs and pluggy): plugin ``hooks.py`` modules import it, and listing
plugins must stay fast. The registry, config and CLI machinery are imported when first used.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omni_rl.context import BuildContext
from omni_rl.errors import ConfigError, OmniRLError, PluginError, RuntimeFailure
from omni_rl.hookspecs import hookimpl
from omni_rl.specs import (
    KINDS,
    AdvantageSpec,
    AlgorithmSpec,
    BenchmarkSpec,
    ComponentSpec,
    LossSpec,
    ModelSpec,
    NoOptions,
    RewardSpec,
    RolloutSpec,
    SamplerSpec,
)

if TYPE_CHECKING:
    from omni_rl.config.overrides import Override
    from omni_rl.registry import Registry
    from omni_rl.schema import ResolvedConfig

__all__ = [
    "KINDS",
    "AdvantageSpec",
    "AlgorithmSpec",
    "BenchmarkSpec",
    "BuildContext",
    "ComponentSpec",
    "ConfigError",
    "LossSpec",
    "ModelSpec",
    "NoOptions",
    "OmniRLError",
    "PluginError",
    "RewardSpec",
    "RolloutSpec",
    "RuntimeFailure",
    "SamplerSpec",
    "build",
    "get_registry",
    "hookimpl",
    "load_config",
    "set_registry",
]

_lock = threading.Lock()
_registry: Registry | None = None


def get_registry(reload: bool = False) -> Registry:
    """The registry of the installed plugins, loaded on first use and cached for the process.

    ``reload=True`` loads the entry points again (after ``pip install`` in a notebook, or after changing
    ``OMNI_RL_LOAD_PLUGINS``). Conflicts are not raised here: call ``registry.validate()`` for that.
    """
    global _registry
    with _lock:
        if _registry is None or reload:
            import importlib

            from omni_rl.plugins import load_plugins

            importlib.invalidate_caches()  # see distributions pip installed since the last load
            from omni_rl.registry import Registry

            _registry = Registry.collect(load_plugins())
        return _registry


def set_registry(registry: Registry | None) -> None:
    """Replace the cached registry (tests use an isolated one); None drops it so the next use reloads."""
    global _registry
    with _lock:
        _registry = registry


def build(
    kind: str,
    name: str,
    options: Mapping[str, Any] | Any = None,
    ctx: BuildContext | None = None,
) -> Any:
    """Build one component by kind and name, e.g. ``build("sampler", "flow_sde", {"noise_level": 0.7})``.

    ``options`` is a TOML-shaped dict checked like the ``options`` of a config section (same messages, with
    ``$.<kind>.options`` paths), or an instance of the component's config class. The registry is
    ``ctx.registry`` when given, else :func:`get_registry`.
    """
    from omni_rl.config import structure_options

    registry = ctx.registry if ctx is not None and ctx.registry is not None else get_registry()
    spec = registry.get(kind, name)
    config = structure_options(spec, {} if options is None else options)
    return spec.factory(config, ctx if ctx is not None else BuildContext(registry=registry))


def load_config(
    path: str | Path, overrides: Iterable[str | Override] = (), registry: Registry | None = None
) -> ResolvedConfig:
    """Read and fully validate a config file (see :func:`omni_rl.config.load_config`)."""
    from omni_rl.config import load_config as _load_config

    return _load_config(path, overrides, registry)
