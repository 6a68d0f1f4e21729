"""Config files: TOML → attrs in two passes, every problem of every section reported at once.

Pass 1 structures the file's shape (:class:`omni_rl.config.schema.TrainConfig`, unknown keys forbidden); the
``[algorithm]`` preset fills what the file leaves out; pass 2 structures each component's ``options`` into
the config class of the component the registry resolves. See docs/config.md.
"""

from __future__ import annotations

from omni_rl.config.converter import make_converter, shared_converter, structure
from omni_rl.config.loader import core_version, load_config, resolve_config, structure_options
from omni_rl.config.overrides import Override, apply_overrides, parse_override
from omni_rl.config.presets import apply_preset, deep_merge, preset_problems
from omni_rl.config.prompts import check_prompt_sources, prompt_source_problems
from omni_rl.config.resolved import PLUGIN_VERSIONS, RESOLVED_CONFIG, resolved_toml, write_resolved
from omni_rl.config.toml import dumps, parse_toml, parse_toml_text, parse_value

__all__ = [
    "PLUGIN_VERSIONS",
    "RESOLVED_CONFIG",
    "Override",
    "apply_overrides",
    "apply_preset",
    "check_prompt_sources",
    "core_version",
    "deep_merge",
    "dumps",
    "load_config",
    "make_converter",
    "parse_override",
    "parse_toml",
    "parse_toml_text",
    "parse_value",
    "preset_problems",
    "prompt_source_problems",
    "resolve_config",
    "resolved_toml",
    "shared_converter",
    "structure",
    "structure_options",
    "write_resolved",
]
