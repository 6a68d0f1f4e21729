"""``--set section.key=value``: change one value of the file from the command line, typed like the file.

The key is a TOML dotted key (quoted parts allowed: ``model.options."odd.key"=1``); a numeric part indexes an
array of tables (``reward.0.weight=2``). The value is read as a TOML value and falls back to a bare string,
so ``--set model.options.path=/data/sd3`` needs no quotes while ``--set optim.lr=1e-4`` is a float.
Overrides apply to the file before the ``[algorithm]`` preset, so they can tune a preset-filled section too.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from typing import Any

import attrs
import tomli

from omni_rl.config.converter import toml_type
from omni_rl.config.toml import parse_value
from omni_rl.errors import ConfigError

_HINT = (
    "write --set section.key=value, e.g. --set optim.lr=1e-4 or --set reward.0.weight=2 "
    "(values are TOML: quote a string that looks like a number)"
)


@attrs.frozen
class Override:
    """One parsed ``--set``: the key path and the value."""

    text: str
    keys: tuple[str, ...]
    value: Any


def parse_override(text: str) -> Override:
    """Split ``a.b=value`` into its key path and TOML-typed value."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set {text!r}: expected section.key=value", hint=_HINT)
    return Override(text=text, keys=_parse_key(text, key.strip()), value=parse_value(value))


def _parse_key(text: str, key: str) -> tuple[str, ...]:
    try:
        node: Any = tomli.loads(f"{key} = 0")
    except tomli.TOMLDecodeError:
        raise ConfigError(f"--set {text!r}: {key!r} is not a TOML key", hint=_HINT) from None
    keys: list[str] = []
    while isinstance(node, dict):
        ((part, node),) = node.items()
        keys.append(part)
    return tuple(keys)


def apply_overrides(raw: dict[str, Any], overrides: Iterable[str | Override]) -> dict[str, Any]:
    """A copy of ``raw`` with every override applied; all malformed overrides are reported together."""
    result = copy.deepcopy(raw)
    problems: list[str] = []
    for item in overrides:
        try:
            override = item if isinstance(item, Override) else parse_override(item)
            _apply(result, override)
        except ConfigError as exc:
            problems.append(exc.message)
    if problems:
        raise ConfigError("\n".join(problems), hint=_HINT)
    return result


def _apply(document: dict[str, Any], override: Override) -> None:
    node: Any = document
    for depth, key in enumerate(override.keys):
        last = depth == len(override.keys) - 1
        where = ".".join(override.keys[: depth + 1])
        if isinstance(node, list):
            index = _index(override, key, node, where)
            if index == len(node):
                node.append({})
            if last:
                node[index] = override.value
            else:
                node = node[index]
            continue
        if not isinstance(node, dict):
            parent = ".".join(override.keys[:depth])
            raise ConfigError(f"--set {override.text!r}: {parent} is {toml_type(node)}, not a table")
        if last:
            node[key] = copy.deepcopy(override.value)
        elif depth == 0 and key not in node and override.keys[1].isdigit():
            # a section indexed by number is an array of tables: ``eval_reward.0.name=x`` creates the first
            # [[eval_reward]] of a file without one, as ``reward.1.name=x`` appends to [[reward]]
            node = node.setdefault(key, [])
        else:
            node = node.setdefault(key, {})


def _index(override: Override, key: str, array: Sequence[Any], where: str) -> int:
    if not key.isdigit():
        parent = where.rsplit(".", 1)[0]
        raise ConfigError(f"--set {override.text!r}: {parent} is an array; index it with a number ({parent}.0.{key})")
    index = int(key)
    if index > len(array):
        entries = f"{len(array)} {'entry' if len(array) == 1 else 'entries'}"
        raise ConfigError(f"--set {override.text!r}: {where} is out of range ({entries}; {len(array)} appends one)")
    return index
