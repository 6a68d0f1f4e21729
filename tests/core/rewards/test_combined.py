"""Several weighted ``[[reward]]`` sections as one score (omni_rl.rewards.combined.CombinedReward), without Ray.

Two toy rewards: the toys' ``toy_brightness`` (mean brightness, "red" sub-score) and a ``toy_darkness`` defined
here (1 - brightness, "blue" sub-score) that raises on request, so the failure policy can be tested too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
from core_toys import TOY_CONFIG, ToyPlugin

from omni_rl.batch import RewardResult
from omni_rl.config import load_config
from omni_rl.config.schema import ResolvedComponent
from omni_rl.errors import RuntimeFailure
from omni_rl.hookspecs import hookimpl
from omni_rl.rewards.combined import CombinedReward
from omni_rl.specs import RewardSpec
from omni_rl.testing import InlinePlugin, make_registry


@attrs.frozen(kw_only=True)
class DarknessConfig:
    #: raise instead of scoring (a reward model that crashes)
    fail: bool = False


class ToyDarkness:
    def __init__(self, config: DarknessConfig) -> None:
        self.fail = config.fail

    def __call__(
        self, images: np.ndarray, prompts: Sequence[str], metadata: Sequence[Mapping[str, Any]]
    ) -> RewardResult:
        if self.fail:
            raise OSError("model file unreadable")
        pixels = np.asarray(images, dtype=np.float64) / 255.0
        return RewardResult(
            scores=1.0 - pixels.mean(axis=(1, 2, 3)), details={"blue": pixels[..., 2].mean(axis=(1, 2))}
        )


class DarknessPlugin:
    @hookimpl
    def omni_rl_reward_models(self) -> list[RewardSpec]:
        return [
            RewardSpec(name="toy_darkness", factory=lambda c, ctx: ToyDarkness(c), config=DarknessConfig, summary="")
        ]


IMAGES = np.random.default_rng(0).integers(0, 256, size=(3, 8, 8, 3), dtype=np.uint8)
PROMPTS = ["a", "b", "c"]


def _brightness(images: np.ndarray) -> np.ndarray:
    return (images / 255.0).mean(axis=(1, 2, 3))


@pytest.fixture
def rewards_from(write_config: Callable[[str], Path]) -> Callable[..., list[ResolvedComponent]]:
    """``rewards_from(darkness_section) -> [[reward]] sections`` of TOY_CONFIG (brightness, weight 2) plus
    a toy_darkness section (weight 0.5) with extra keys, loaded through the real config loader."""
    registry = make_registry(InlinePlugin(ToyPlugin(), distribution="omni-rl-toys"), DarknessPlugin())
    registry.validate()

    def load(extra: str = "") -> list[ResolvedComponent]:
        text = TOY_CONFIG + f'\n[[reward]]\nname = "toy_darkness"\nweight = 0.5\n{extra}\n'
        return load_config(write_config(text), registry=registry).rewards

    return load


def test_total_is_the_weighted_sum_and_every_sub_score_is_logged(rewards_from) -> None:
    sections = rewards_from()
    assert [(s.name, s.weight) for s in sections] == [("toy_brightness", 2.0), ("toy_darkness", 0.5)]
    scored = CombinedReward(sections, None)(IMAGES, PROMPTS, [{}] * 3)

    bright = _brightness(IMAGES)
    dark = 1.0 - bright
    np.testing.assert_allclose(scored.scores["toy_brightness"], bright)
    np.testing.assert_allclose(scored.scores["toy_darkness"], dark)
    np.testing.assert_allclose(scored.total, 2.0 * bright + 0.5 * dark)

    metrics = scored.metrics()
    assert metrics["reward/mean"] == pytest.approx(np.mean(2.0 * bright + 0.5 * dark))
    assert metrics["reward/std"] == pytest.approx(np.std(2.0 * bright + 0.5 * dark))
    assert metrics["reward/toy_brightness/mean"] == pytest.approx(bright.mean())
    assert metrics["reward/toy_darkness/mean"] == pytest.approx(dark.mean())
    assert metrics["reward/toy_brightness/red"] == pytest.approx((IMAGES[..., 0] / 255.0).mean())
    assert metrics["reward/toy_darkness/blue"] == pytest.approx((IMAGES[..., 2] / 255.0).mean())
    assert not any(key.endswith("/failures") for key in metrics)


def test_on_error_zero_scores_the_failed_reward_zero_and_counts_it(rewards_from) -> None:
    sections = rewards_from('on_error = "zero"\noptions = { fail = true }')
    combined = CombinedReward(sections, None)
    for _ in range(2):
        scored = combined(IMAGES, PROMPTS, [{}] * 3)
        # the working reward still counts with its weight; the failed one adds 0
        np.testing.assert_allclose(scored.total, 2.0 * _brightness(IMAGES))
        np.testing.assert_array_equal(scored.scores["toy_darkness"], np.zeros(3))
        metrics = scored.metrics()
        assert metrics["reward/toy_darkness/failures"] == 1.0  # one failed batch per call
        assert metrics["reward/toy_darkness/mean"] == 0.0
        assert "reward/toy_brightness/failures" not in metrics


def test_a_raising_reward_without_on_error_stops_with_its_name(rewards_from) -> None:
    combined = CombinedReward(rewards_from("options = { fail = true }"), None)
    with pytest.raises(RuntimeFailure) as info:
        combined(IMAGES, PROMPTS, [{}] * 3)
    message = str(info.value)
    assert "reward 'toy_darkness' failed: OSError: model file unreadable" in message
    assert 'on_error = "zero"' in message and "reward/toy_darkness/failures" in message


def test_a_wrong_number_of_scores_is_a_failure_naming_the_reward(rewards_from) -> None:
    sections = rewards_from()
    combined = CombinedReward(sections, None)
    combined.models[1] = lambda images, prompts, metadata: np.zeros(len(prompts) + 1)
    with pytest.raises(RuntimeFailure, match="reward 'toy_darkness' returned 4 scores for 3 images"):
        combined(IMAGES, PROMPTS, [{}] * 3)
    sections = rewards_from('on_error = "zero"')
    combined = CombinedReward(sections, None)
    combined.models[1] = lambda images, prompts, metadata: np.zeros(len(prompts) - 1)
    with pytest.raises(RuntimeFailure, match="returned 2 scores for 3 images"):  # a bug, not a failed batch
        combined(IMAGES, PROMPTS, [{}] * 3)


class _ServedReward:
    """A reward holding something outside the process (a model server): optional start / close / ray_resources."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def start(self) -> None:
        self.events.append("start")

    def close(self) -> None:
        self.events.append("close")

    def ray_resources(self) -> list[dict[str, float]]:
        return [{"CPU": 0.0, "GPU": 1.0}, {"CPU": 0.0, "GPU": 1.0}]

    def __call__(self, images: np.ndarray, prompts: Sequence[str], metadata: Sequence[Mapping[str, Any]]) -> Any:
        return np.ones(len(prompts))


def test_an_in_driver_reward_is_started_closed_and_its_ray_actors_counted() -> None:
    served = _ServedReward()
    spec = RewardSpec(name="served", factory=lambda config, ctx: served, config=DarknessConfig, summary="")
    section = ResolvedComponent(kind="reward", name="served", spec=spec, options=DarknessConfig())
    rewards = CombinedReward([section], None)
    assert rewards.actor_resources() == [{"CPU": 0.0, "GPU": 1.0}, {"CPU": 0.0, "GPU": 1.0}]
    rewards.start()
    rewards.close()
    assert served.events == ["start", "close"]
