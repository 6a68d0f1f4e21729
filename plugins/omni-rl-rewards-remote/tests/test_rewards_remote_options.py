"""The remote rewards' options refuse bad values built in Python as strictly as from TOML (the core's validators),
each message naming the option."""

from __future__ import annotations

import math

import pytest
from omni_rl_rewards_remote.config import HttpRewardConfig, VlmJudgeConfig

JUDGE = {"base_url": "http://localhost:8000/v1", "model": "judge"}
HTTP = {"url": "http://127.0.0.1:8000/shapes"}


@pytest.mark.parametrize(
    ("config", "kwargs", "message"),
    [
        (VlmJudgeConfig, {**JUDGE, "concurrency": True}, "concurrency must be an integer >= 1, got True"),
        (VlmJudgeConfig, {**JUDGE, "max_tokens": 0}, "max_tokens must be an integer >= 1, got 0"),
        (VlmJudgeConfig, {**JUDGE, "timeout_s": math.inf}, "timeout_s must be a finite number > 0, got inf"),
        (VlmJudgeConfig, {**JUDGE, "temperature": -0.5}, "temperature must be a finite number >= 0, got -0.5"),
        (VlmJudgeConfig, {**JUDGE, "max_retries": 1.0}, "max_retries must be an integer >= 0, got 1.0"),
        (
            VlmJudgeConfig,
            {**JUDGE, "video_frames": 65},
            "video_frames must be an integer between 0 and 64, got 65; 0 judges each frame as an image",
        ),
        (VlmJudgeConfig, {**JUDGE, "number_range": (1.0, 1.0)}, "number_range must be [low, high] with low < high"),
        (VlmJudgeConfig, {**JUDGE, "base_url": "localhost:8000"}, "base_url must be an http:// or https:// URL"),
        (HttpRewardConfig, {**HTTP, "batch_size": -1}, "batch_size must be an integer >= 0, got -1"),
        (HttpRewardConfig, {**HTTP, "backoff_s": math.nan}, "backoff_s must be a finite number >= 0, got nan"),
    ],
)
def test_bad_options_are_refused_with_the_option_named(config: type, kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError) as excinfo:
        config(**kwargs)
    assert str(excinfo.value).startswith(message)


def test_a_pasted_key_is_refused_without_being_echoed() -> None:
    with pytest.raises(ValueError) as excinfo:
        HttpRewardConfig(**HTTP, api_key_env="sk-secret-value")
    assert str(excinfo.value).startswith("api_key_env must be the NAME of an environment variable")
    assert "sk-secret-value" not in str(excinfo.value)
