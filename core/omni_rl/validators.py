"""attrs validators for component config classes, shared by every plugin.

Torch-free, so a plugin's ``config.py`` (which ``hooks.py`` hands to the registry) still imports in
milliseconds. Each message starts with the option's name: the config loader prefixes it with the option's
path (``... @ $.loss.options.clip_ratio``), so the user reads both where and what.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import attrs

Validator = Callable[[Any, "attrs.Attribute[Any]", Any], None]


def is_finite_number(value: Any) -> bool:
    """A real int or float (bools excluded), not NaN or infinite."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def finite(instance: Any, attribute: attrs.Attribute, value: float) -> None:
    if not is_finite_number(value):
        raise ValueError(f"{attribute.name} must be a finite number, got {value!r}")


def positive_finite(instance: Any, attribute: attrs.Attribute, value: float) -> None:
    if not (is_finite_number(value) and value > 0):
        raise ValueError(f"{attribute.name} must be a finite number > 0, got {value!r}")


def non_negative_finite(instance: Any, attribute: attrs.Attribute, value: float) -> None:
    if not (is_finite_number(value) and value >= 0):
        raise ValueError(f"{attribute.name} must be a finite number >= 0, got {value!r}")


def optional_positive_finite(instance: Any, attribute: attrs.Attribute, value: float | None) -> None:
    if value is not None and not (is_finite_number(value) and value > 0):
        raise ValueError(f"{attribute.name} must be a finite number > 0 (or left out), got {value!r}")


def unit_interval(instance: Any, attribute: attrs.Attribute, value: float) -> None:
    """In [0, 1]."""
    if not (is_finite_number(value) and 0.0 <= value <= 1.0):
        raise ValueError(f"{attribute.name} must be between 0 and 1, got {value!r}")


def fraction(instance: Any, attribute: attrs.Attribute, value: float) -> None:
    """In (0, 1]: a share of something that must keep at least a little of it."""
    if not (is_finite_number(value) and 0.0 < value <= 1.0):
        raise ValueError(f"{attribute.name} must be in (0, 1], got {value!r}")


def int_at_least(low: int) -> Validator:
    """An integer (bools excluded) >= ``low``."""

    def check(instance: Any, attribute: attrs.Attribute, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{attribute.name} must be an integer >= {low}, got {value!r}")

    return check


positive_int = int_at_least(1)
non_negative_int = int_at_least(0)
