"""The shared config validators: what they accept, what they refuse, and that messages name the option."""

from __future__ import annotations

import math

import attrs
import pytest

from omni_rl import validators as v


@attrs.frozen(kw_only=True)
class Options:
    rate: float = attrs.field(default=1.0, validator=v.positive_finite)
    weight: float = attrs.field(default=0.0, validator=v.non_negative_finite)
    share: float = attrs.field(default=1.0, validator=v.fraction)
    prob: float = attrs.field(default=0.0, validator=v.unit_interval)
    alpha: float | None = attrs.field(default=None, validator=v.optional_positive_finite)
    count: int = attrs.field(default=1, validator=v.positive_int)
    skip: int = attrs.field(default=0, validator=v.non_negative_int)
    steps: int = attrs.field(default=3, validator=v.int_at_least(3))
    shift: float = attrs.field(default=0.0, validator=v.finite)


def test_defaults_and_edges_are_accepted() -> None:
    Options()
    Options(rate=1e-9, weight=0, share=1.0, prob=1.0, alpha=0.5, count=1, skip=0, steps=3, shift=-2.0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rate": 0.0}, "rate must be a finite number > 0, got 0.0"),
        ({"rate": math.inf}, "rate must be a finite number > 0, got inf"),
        ({"rate": True}, "rate must be a finite number > 0, got True"),
        ({"weight": -1.0}, "weight must be a finite number >= 0, got -1.0"),
        ({"share": 0.0}, "share must be in (0, 1], got 0.0"),
        ({"prob": 1.5}, "prob must be between 0 and 1, got 1.5"),
        ({"alpha": 0.0}, "alpha must be a finite number > 0 (or left out), got 0.0"),
        ({"count": 0}, "count must be an integer >= 1, got 0"),
        ({"count": 2.0}, "count must be an integer >= 1, got 2.0"),
        ({"skip": -1}, "skip must be an integer >= 0, got -1"),
        ({"steps": 2}, "steps must be an integer >= 3, got 2"),
        ({"shift": math.nan}, "shift must be a finite number, got nan"),
    ],
)
def test_bad_values_are_refused_with_the_option_named(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError) as excinfo:
        Options(**kwargs)
    assert str(excinfo.value) == message


@attrs.frozen(kw_only=True)
class Hinted:
    path: str = attrs.field(default="x", validator=v.with_hint(v.non_empty, "a pipeline directory or a hub id"))
    rank: int = attrs.field(default=0, validator=v.int_at_least(0, hint="0 = full fine-tuning"))
    length: int = attrs.field(default=1, validator=v.int_between(1, 512, hint="the pipeline's limit"))
    ratio: float = attrs.field(default=0.5, validator=v.finite_between(0, 1, hint="a share of the batch"))
    batch: int | str = attrs.field(default="auto", validator=v.count_or_auto(64, hint="or leave it to auto"))
    dtype: str = attrs.field(default="float32", validator=v.with_hint(attrs.validators.in_(("float32",)), "see docs"))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"path": " "}, "path must not be empty, got ' '; a pipeline directory or a hub id"),
        ({"rank": -1}, "rank must be an integer >= 0, got -1; 0 = full fine-tuning"),
        ({"rank": True}, "rank must be an integer >= 0, got True; 0 = full fine-tuning"),
        ({"length": 513}, "length must be an integer between 1 and 512, got 513; the pipeline's limit"),
        ({"ratio": 2.0}, "ratio must be a finite number in [0, 1], got 2.0; a share of the batch"),
        ({"batch": 0}, 'batch must be an integer between 1 and 64 or "auto", got 0; or leave it to auto'),
        ({"dtype": "int8"}, "'dtype' must be in ('float32',) (got 'int8'); see docs"),
    ],
)
def test_a_hint_ends_the_refusal_and_accepts_what_the_rule_accepts(kwargs: dict, message: str) -> None:
    Hinted()
    Hinted(path="p", rank=3, length=512, ratio=1.0, batch=64)
    with pytest.raises(ValueError) as excinfo:
        Hinted(**kwargs)
    assert str(excinfo.value) == message
