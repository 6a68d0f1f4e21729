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

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omni_rl import compat
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
    from omni_rl.config.schema import ResolvedConfig
    from omni_rl.registry import Registry

compat.install()  # the module paths of 0.1.0 that moved keep working for one release

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


def get_registry(reload: bool = False) -> Registry:
    """The registry of the installed plugins (:func:`omni_rl.registry.get_registry`, imported on first use so
    that importing this package stays cheap)."""
    from omni_rl.registry import get_registry as _get_registry

    return _get_registry(reload)


def set_registry(registry: Registry | None) -> None:
    """Replace the cached registry (:func:`omni_rl.registry.set_registry`)."""
    from omni_rl.registry import set_registry as _set_registry

    _set_registry(registry)


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
