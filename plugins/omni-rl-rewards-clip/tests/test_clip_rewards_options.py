"""The model-reward options refuse bad values built in Python as strictly as from TOML (the core's validators): a
bool is not a batch size, an empty weight source says what to write."""

from __future__ import annotations

import math

import pytest
from omni_rl_rewards_clip.config import AestheticConfig, ClipScoreConfig, HpsV2Config, PickScoreConfig


@pytest.mark.parametrize(
    ("config", "kwargs", "message"),
    [
        (PickScoreConfig, {"batch_size": True}, "batch_size must be an integer >= 1, got True"),
        (PickScoreConfig, {"batch_size": 0}, "batch_size must be an integer >= 1, got 0"),
        (PickScoreConfig, {"scale": math.nan}, "scale must be a finite number > 0, got nan"),
        (ClipScoreConfig, {"factor": 0.0}, "factor must be a finite number > 0, got 0.0"),
        (
            ClipScoreConfig,
            {"model": " "},
            "model must not be empty, got ' '; a hub id (e.g. 'openai/clip-vit-large-patch14') or a local path",
        ),
        (HpsV2Config, {"filename": ""}, "filename must not be empty, got ''"),
        (AestheticConfig, {"predictor": ""}, "predictor must not be empty, got ''; a hub id"),
        (AestheticConfig, {"device": "gpu"}, "device must be 'auto' or a torch device such as 'cpu'"),
    ],
)
def test_bad_options_are_refused_with_the_option_named(config: type, kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError) as excinfo:
        config(**kwargs)
    assert str(excinfo.value).startswith(message)


def test_local_sources_and_devices_are_accepted() -> None:
    config = ClipScoreConfig(model="/models/clip", batch_size=1, device="cuda:1")
    assert (config.model, config.batch_size, config.device) == ("/models/clip", 1, "cuda:1")
