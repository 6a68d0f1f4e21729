"""GenEval's options are checked by omni_rl.validators, with the core's strictness (issue 47: one set of
validators): a boolean is not a count, a confidence lies in [0, 1), a model is a non-blank hub id or path."""

from __future__ import annotations

import pytest
from omni_rl_geneval.config import GenEvalConfig


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("batch_size", True, "batch_size"),
        ("max_objects", 0, "max_objects"),
        ("threshold", 1.0, "[0, 1)"),
        ("counting_threshold", float("nan"), "counting_threshold"),
        ("detector", " ", "hub id or a local directory"),
        ("clip_model", "", "clip_model must not be empty"),
    ],
)
def test_bad_options_are_refused_naming_the_option(option: str, value: object, says: str) -> None:
    with pytest.raises((ValueError, TypeError), match=None) as error:
        GenEvalConfig(**{option: value})
    assert says in str(error.value)


def test_the_defaults_are_geneval_s() -> None:
    config = GenEvalConfig()
    assert (config.threshold, config.counting_threshold, config.max_objects) == (0.3, 0.9, 16)
    assert GenEvalConfig(threshold=0.0).threshold == 0.0  # the closed end of [0, 1)
