"""Image rewards on videos (omni_rl.rewards.frames): each aggregate equals per-frame calls of the image reward, a
reward declaring ``scores_video`` gets whole videos, images pass through, and ``[[reward]] aggregate`` reaches the
combined reward through the real config loader."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from core_toys import TOY_CONFIG, ToyPlugin

from omni_rl.batch import RewardResult
from omni_rl.config import load_config
from omni_rl.errors import ConfigError
from omni_rl.rewards.combined import CombinedReward
from omni_rl.rewards.frames import FrameRewards
from omni_rl.testing import InlinePlugin, make_registry

#: 3 videos of 4 frames, 8x8: frame brightness differs so every aggregate gives a different score
VIDEOS = np.random.default_rng(1).integers(0, 256, size=(3, 4, 8, 8, 3), dtype=np.uint8)
PROMPTS = ["a", "b", "c"]


class Brightness:
    """An image reward: the mean brightness, a "red" sub-score, and the calls it got."""

    def __init__(self) -> None:
        self.calls: list[tuple[tuple[int, ...], list[str], list[Any]]] = []

    def __call__(
        self, images: np.ndarray, prompts: Sequence[str], metadata: Sequence[Mapping[str, Any]]
    ) -> RewardResult:
        assert images.ndim == 4, "an image reward must only ever see (N, H, W, 3)"
        self.calls.append((images.shape, list(prompts), list(metadata)))
        pixels = images / 255.0
        return RewardResult(scores=pixels.mean(axis=(1, 2, 3)), details={"red": pixels[..., 0].mean(axis=(1, 2))})


def _per_frame(videos: np.ndarray) -> np.ndarray:
    """(N, F) scores of the image reward called on one frame at a time."""
    reward = Brightness()
    return np.array([[reward(v[f : f + 1], ["x"], [{}]).scores[0] for f in range(v.shape[0])] for v in videos])


@pytest.mark.parametrize(
    ("aggregate", "expected"),
    [
        ("mean", lambda s: s.mean(axis=1)),
        ("min", lambda s: s.min(axis=1)),
        ("first", lambda s: s[:, 0]),
        ("last", lambda s: s[:, -1]),
    ],
)
def test_each_aggregate_equals_per_frame_calls(aggregate: str, expected: Callable[[np.ndarray], np.ndarray]) -> None:
    inner = Brightness()
    result = RewardResult.coerce(FrameRewards(inner, aggregate)(VIDEOS, PROMPTS, [{"i": i} for i in range(3)]))
    np.testing.assert_allclose(result.scores, expected(_per_frame(VIDEOS)))
    frames = 1 if aggregate in ("first", "last") else 4
    ((shape, prompts, metadata),) = inner.calls
    assert shape == (3 * frames, 8, 8, 3)
    assert prompts == [p for p in PROMPTS for _ in range(frames)]  # each frame with its video's prompt
    assert metadata == [{"i": i} for i in range(3) for _ in range(frames)]
    red = (VIDEOS[..., 0] / 255.0).mean(axis=(2, 3))
    np.testing.assert_allclose(result.details["red"], expected(red))


def test_images_and_video_rewards_pass_through() -> None:
    inner = Brightness()
    images = VIDEOS[:, 0]
    np.testing.assert_allclose(RewardResult.coerce(FrameRewards(inner, "min")(images, PROMPTS, [])).scores,
                               (images / 255.0).mean(axis=(1, 2, 3)))  # fmt: skip

    class WholeVideo:
        scores_video = True

        def __call__(self, videos: np.ndarray, prompts: Sequence[str], metadata: Sequence[Any]) -> np.ndarray:
            assert videos.shape == VIDEOS.shape
            return np.arange(len(videos), dtype=np.float64)

    np.testing.assert_array_equal(FrameRewards(WholeVideo())(VIDEOS, PROMPTS, []), [0.0, 1.0, 2.0])
    assert FrameRewards(WholeVideo()).scores_video is True  # attributes are the wrapped reward's


def test_failed_frames_count_their_videos_at_most_once_each() -> None:
    class Failing:
        def __call__(self, images: np.ndarray, prompts: Sequence[str], metadata: Sequence[Any]) -> RewardResult:
            return RewardResult(scores=np.zeros(len(images)), failures=len(images))

    assert RewardResult.coerce(FrameRewards(Failing())(VIDEOS, PROMPTS, [])).failures == 3


def test_aggregate_is_a_reward_section_key(write_config: Callable[[str], Path]) -> None:
    registry = make_registry(InlinePlugin(ToyPlugin(), distribution="omni-rl-toys"))
    registry.validate()
    text = TOY_CONFIG.replace(
        '[[reward]]\nname = "toy_brightness"', '[[reward]]\nname = "toy_brightness"\naggregate = "min"'
    )
    assert 'aggregate = "min"' in text
    sections = load_config(write_config(text), registry=registry).rewards
    assert sections[0].aggregate == "min"
    scored = CombinedReward(sections, None)(VIDEOS, PROMPTS, [{}] * 3)
    np.testing.assert_allclose(scored.scores["toy_brightness"], _per_frame(VIDEOS).min(axis=1))
    with pytest.raises(ConfigError, match="aggregate"):
        load_config(write_config(text.replace('"min"', '"median"')), registry=registry)
