"""``[algorithm]`` presets: fill what the user left out, never override what they wrote.

Rules, per section of the preset's ``defaults``:

- a component section (``sampler``, ``rollout``, ``advantage``, ``loss``, ``model``) absent from the file is
  taken from the preset; present with the same component name (or an alias of it), the preset's options are
  merged under the user's; present without a ``name``, it takes the preset's name (so ``--set
  loss.options.clip_ratio=1e-3`` tunes the preset's loss); a different name replaces the preset's section;
- ``reward`` (an array) is taken from the preset only when the file has none;
- any other table (``optim``, ``run``, ``log``, ...) fills the keys the user left out.
"""

from __future__ import annotations

import copy
import typing
from collections.abc import Mapping
from typing import Any

import attrs

from omni_rl.config.converter import shared_converter, structure
from omni_rl.config.schema import COMPONENT_SECTIONS, ComponentSection, RewardSection, TrainConfig
from omni_rl.errors import PluginError
from omni_rl.registry import Component, Registry
from omni_rl.specs import AlgorithmSpec

#: Sections a preset may fill (every section of the file except the preset choice itself).
PRESET_SECTIONS: tuple[str, ...] = tuple(f.name for f in attrs.fields(TrainConfig) if f.name != "algorithm")


def apply_preset(raw: dict[str, Any], registry: Registry) -> tuple[dict[str, Any], list[str], Component | None]:
    """(merged config, problems, the preset's component or None when the file names no usable preset)."""
    section = raw.get("algorithm")
    if not isinstance(section, Mapping) or not isinstance(section.get("name"), str):
        return raw, [], None  # no preset, or a malformed [algorithm] that pass 1 reports
    name = section["name"]
    try:
        component = registry.find("algorithm", name)
    except PluginError as exc:
        return raw, [f"{exc.message} @ $.algorithm.name"], None
    if component is None:
        return raw, [f"{registry.unknown_problem('algorithm', name)} @ $.algorithm.name"], None
    merged = copy.deepcopy(raw)
    problems = []
    for key, default in component.spec.defaults.items():  # type: ignore[attr-defined]
        if key not in PRESET_SECTIONS:
            problems.append(
                f"algorithm {component.name!r} ({component.plugin.label}) has defaults for {key!r}, "
                f"which is not a section @ $.algorithm.name"
            )
        elif key in COMPONENT_SECTIONS:
            merged[key] = _merge_component(merged.get(key), default, key, registry)
        elif key == "reward":
            merged.setdefault("reward", copy.deepcopy(list(default)))
        elif key not in merged:
            merged[key] = copy.deepcopy(dict(default))
        elif isinstance(merged[key], dict):
            merged[key] = deep_merge(default, merged[key])
    return merged, problems, component


def preset_problems(spec: AlgorithmSpec, registry: Registry) -> list[str]:
    """Everything wrong with a preset's ``defaults`` (for its plugin's tests): unknown sections, component
    names nobody provides, options its components reject, keys a section does not have."""
    converter = shared_converter()
    problems: list[str] = []
    types = typing.get_type_hints(TrainConfig)
    for key, default in spec.defaults.items():
        path = f"$.{key}"
        if key not in PRESET_SECTIONS:
            problems.append(f"{key!r} is not a section @ {path}")
            continue
        if key not in COMPONENT_SECTIONS and key != "reward":
            problems += structure(converter, dict(default), types[key], path)[1]
            continue
        tables = list(default) if key == "reward" else [default]
        shape = RewardSection if key == "reward" else ComponentSection
        for i, table in enumerate(tables):
            where = f"{path}[{i}]" if key == "reward" else path
            section, shape_problems = structure(converter, table, shape, where)
            problems += shape_problems
            if section is None:
                continue
            component = registry.find(key, section.name)
            if component is None:
                problems.append(f"{registry.unknown_problem(key, section.name)} @ {where}.name")
                continue
            problems += structure(converter, section.options, component.spec.config, f"{where}.options")[1]
    return problems


def _merge_component(user: Any, preset: Mapping[str, Any], kind: str, registry: Registry) -> Any:
    if user is None:
        return copy.deepcopy(dict(preset))
    if not isinstance(user, dict):
        return user  # pass 1 reports the shape
    if "name" not in user or _same_component(kind, user["name"], preset.get("name"), registry):
        return deep_merge(preset, user)
    return user


def _same_component(kind: str, a: Any, b: Any, registry: Registry) -> bool:
    if a == b:
        return True
    if not (isinstance(a, str) and isinstance(b, str)):
        return False
    try:
        first, second = registry.find(kind, a), registry.find(kind, b)
    except PluginError:
        return False
    return first is not None and first is second


def deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` on top of ``base``; nested tables merge key by key, anything else in ``over`` wins."""
    result = copy.deepcopy(dict(base))
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(result.get(key), Mapping):
            result[key] = deep_merge(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result
