"""The rollout options refuse bad values built in Python as strictly as from TOML (the core's validators)."""

from __future__ import annotations

import math

import pytest
from omni_rl_diffusers.config import DiffusersRolloutConfig


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"group_size": True}, "group_size must be an integer >= 1, got True"),
        ({"steps": 0}, "steps must be an integer >= 1, got 0"),
        ({"eval_steps": 2.0}, "eval_steps must be an integer >= 1, got 2.0"),
        ({"num_frames": 0}, "num_frames must be an integer >= 1, got 0"),
        ({"fps": -1}, "fps must be an integer >= 1, got -1"),
        ({"cfg": math.nan}, "cfg must be a finite number >= 0, got nan"),
        ({"cfg": -1.0}, "cfg must be a finite number >= 0, got -1.0"),
    ],
)
def test_bad_options_are_refused_with_the_option_named(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError) as excinfo:
        DiffusersRolloutConfig(**kwargs)
    assert str(excinfo.value) == message


def test_the_edges_are_accepted() -> None:
    config = DiffusersRolloutConfig(group_size=1, steps=1, eval_steps=1, cfg=0.0, num_frames=1, fps=1)
    assert (config.group_size, config.cfg) == (1, 0.0)
