"""The reward options refuse bad values built in Python as strictly as from TOML (the core's validators), each
message naming the option."""

from __future__ import annotations

import math

import pytest
from omni_rl_rewards.config import JpegConfig, OcrConfig


@pytest.mark.parametrize(
    ("config", "kwargs", "message"),
    [
        (JpegConfig, {"scale": math.inf}, "scale must be a finite number > 0, got inf"),
        (JpegConfig, {"quality": 101}, "quality must be an integer between 1 and 100, got 101; PIL's JPEG quality"),
        (JpegConfig, {"quality": True}, "quality must be an integer between 1 and 100, got True"),
        (OcrConfig, {"det_limit_side_len": True}, "det_limit_side_len must be an integer >= 1, got True"),
        (OcrConfig, {"det_limit_side_len": 960.0}, "det_limit_side_len must be an integer >= 1, got 960.0"),
        (OcrConfig, {"min_confidence": math.nan}, "min_confidence must be between 0 and 1, got nan"),
        (OcrConfig, {"num_threads": -1}, "num_threads must be an integer >= 0, got -1"),
    ],
)
def test_bad_options_are_refused_with_the_option_named(config: type, kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError) as excinfo:
        config(**kwargs)
    assert str(excinfo.value).startswith(message)


def test_the_edges_are_accepted() -> None:
    assert JpegConfig(scale=1e-6, quality=1).quality == 1 and JpegConfig(quality=100).quality == 100
    assert OcrConfig(det_limit_side_len=1, min_confidence=0.0, num_threads=0).num_threads == 0
