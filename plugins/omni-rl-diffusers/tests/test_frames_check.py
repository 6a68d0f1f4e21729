"""The ``diffusers`` rollout's config check of ``num_frames`` (qa-2026-12 N11): an image model asked for frames, or a
video model asked for a frame count its VAE cannot make, is refused by ``omni-rl check`` and before ``run`` starts
anything, from what the model's spec declares (``ModelSpec.modality`` / ``temporal_compression``)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from omni_rl_diffusers.config import DiffusersRolloutConfig
from omni_rl_diffusers.frames import frames_check
from omni_rl_diffusers.hooks import omni_rl_rollout_backends

from omni_rl.specs import ModelSpec


def _components(frames: int, **spec: object) -> dict[str, SimpleNamespace]:
    model = ModelSpec(name="m", factory=lambda c, ctx: None, **spec)
    return {
        "model": SimpleNamespace(name="m", spec=model),
        "rollout": SimpleNamespace(name="diffusers", options=DiffusersRolloutConfig(num_frames=frames)),
    }


def test_the_rollout_spec_carries_the_check() -> None:
    (spec,) = omni_rl_rollout_backends()
    assert spec.check is frames_check


def test_frames_on_an_image_model_are_refused() -> None:
    assert frames_check(_components(1)) == []
    (problem,) = frames_check(_components(5))
    assert problem == (
        "invalid value: num_frames = 5, but the 'm' model makes images; remove num_frames (or set it to 1), or use a "
        "video model such as wan @ $.rollout.options.num_frames"
    )


def test_a_video_model_is_left_to_the_preflight_and_the_model() -> None:
    """Its frame count depends on its pipeline's VAE (omni_rl.train.preflight reads it); nothing to say here."""
    assert frames_check(_components(4, modality="video")) == []


def test_without_a_model_section_nothing_is_checked() -> None:
    assert frames_check({"rollout": _components(5)["rollout"]}) == []


EXAMPLES = Path(__file__).parents[3] / "docs" / "examples"


@pytest.mark.parametrize(
    ("example", "frames", "message"),
    [
        ("sd3_tiny_jpeg.toml", 5, "num_frames = 5, but the 'sd3' model makes images"),
        ("flux_tiny_jpeg.toml", 2, "num_frames = 2, but the 'flux' model makes images"),
    ],
)
def test_the_examples_are_refused_at_load_time(example: str, frames: int, message: str) -> None:
    """What the QA probe ran on SD3: it passed `check` and failed in step 1, leaving a run directory behind."""
    from omni_rl import load_config
    from omni_rl.errors import ConfigError

    with pytest.raises(ConfigError, match=message):
        load_config(EXAMPLES / example, [f"rollout.options.num_frames={frames}"])
