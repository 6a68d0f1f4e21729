"""attrs validators for component config classes, shared by every plugin.

Torch-free, so a plugin's ``config.py`` (which ``hooks.py`` hands to the registry) still imports in
milliseconds. Each message starts with the option's name: the config loader prefixes it with the option's
path (``... @ $.loss.options.clip_ratio``), so the user reads both where and what. A plugin whose option wants more
than the rule (what the value means, where a limit comes from) adds a hint: the factories take ``hint=``, and
:func:`with_hint` gives any validator one, so the copies of these checks that differed only by their wording are
not needed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import attrs

Validator = Callable[[Any, "attrs.Attribute[Any]", Any], None]


def _hinted(message: str, hint: str | None) -> str:
    return message if not hint else f"{message}; {hint}"


def with_hint(validator: Validator, hint: str) -> Validator:
    """``validator`` whose refusal ends with ``hint`` (what the value means or what to write instead), e.g.
    ``with_hint(non_empty, "a FluxPipeline directory or a hub id")`` refuses ``path = " "`` with ``path must not be
    empty, got ' '; a FluxPipeline directory or a hub id``. What it accepts is exactly what ``validator`` accepts."""

    def check(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
        try:
            validator(instance, attribute, value)
        except (ValueError, TypeError) as error:
            # attrs' own validators raise with extra args (attribute, choices, value); the text is the first
            text = error.args[0] if error.args and isinstance(error.args[0], str) else str(error)
            kind = TypeError if isinstance(error, TypeError) else ValueError
            raise kind(_hinted(text, hint)) from None

    return check


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


def int_at_least(low: int, *, hint: str | None = None) -> Validator:
    """An integer (bools excluded) >= ``low``; ``hint`` ends the refusal (``0 = full fine-tuning``)."""

    def check(instance: Any, attribute: attrs.Attribute, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(_hinted(f"{attribute.name} must be an integer >= {low}, got {value!r}", hint))

    return check


positive_int = int_at_least(1)
non_negative_int = int_at_least(0)


def int_between(low: int, high: int, *, hint: str | None = None) -> Validator:
    """An integer (bools excluded) in [``low``, ``high``]: the upper bound turns a typo such as ``steps = 10**30``
    into an error at load time instead of a run that allocates, or loops, for ever. ``hint`` ends the refusal
    (where the bound comes from)."""

    def check(instance: Any, attribute: attrs.Attribute, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            message = f"{attribute.name} must be an integer between {low:,} and {high:,}, got {value!r}"
            raise ValueError(_hinted(message, hint))

    return check


def finite_between(
    low: float, high: float, *, low_open: bool = False, high_open: bool = False, hint: str | None = None
) -> Validator:
    """A finite number in the interval from ``low`` to ``high`` (each end closed unless ``*_open``); ``hint`` ends
    the refusal."""
    left, right = "(" if low_open else "[", ")" if high_open else "]"

    def check(instance: Any, attribute: attrs.Attribute, value: float) -> None:
        inside = is_finite_number(value) and (value > low if low_open else value >= low)
        inside = inside and (value < high if high_open else value <= high)
        if not inside:
            message = f"{attribute.name} must be a finite number in {left}{low:g}, {high:g}{right}, got {value!r}"
            raise ValueError(_hinted(message, hint))

    return check


def each(validator: Validator) -> Validator:
    """``validator`` on every item of a tuple/list option (``betas``), each named ``<option>[i]``."""

    def check(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
        for i, item in enumerate(value):
            validator(instance, attribute.evolve(name=f"{attribute.name}[{i}]"), item)

    return check


def non_empty(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    """A string with something in it besides white space (``output_dir = ""`` would write into the working
    directory's root)."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{attribute.name} must not be empty, got {value!r}")


#: the largest image side a rollout may ask for: 16384 px is 4x the largest any current model was trained at,
#: and a latent grid beyond it cannot be allocated anyway; ``height = 10**9`` must fail at load time
MAX_IMAGE_SIDE = 16384


def image_side(instance: Any, attribute: attrs.Attribute, value: int) -> None:
    """An image height or width: an integer multiple of 8 pixels (the VAE's factor), 8 to ``MAX_IMAGE_SIDE``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 8 <= value <= MAX_IMAGE_SIDE or value % 8:
        raise ValueError(
            f"{attribute.name} must be a multiple of 8 pixels between 8 and {MAX_IMAGE_SIDE}, got {value!r}"
        )


def count_or_auto(high: int, *, hint: str | None = None) -> Validator:
    """An integer in [1, ``high``] or the string ``"auto"`` (omni_rl.auto_batch: the largest size that fits);
    ``hint`` ends the refusal."""

    def check(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
        if value == "auto":
            return
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
            message = f'{attribute.name} must be an integer between 1 and {high:,} or "auto", got {value!r}'
            raise ValueError(_hinted(message, hint))

    return check
