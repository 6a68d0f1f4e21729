"""Conformance suite for reward models (:class:`omni_rl.protocols.RewardModel`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import pytest

from omni_rl.batch import RewardResult
from omni_rl.protocols import RewardModel
from omni_rl.rewards.frames import call_reward, reads_conditions
from omni_rl.specs import RewardSpec
from omni_rl.testing._base import SpecConformance


class RewardConformance(SpecConformance):
    """Subclass with a ``spec`` fixture (see :class:`SpecConformance` for ``options`` and ``component``).

    Optional fixtures: ``images`` (uint8, (N, H, W, 3); default 4 random 64×64 images), ``prompts`` and
    ``metadata`` (one per image), ``conditions`` (each image's condition images, given to a reward that
    ``reads_conditions``, as the core calls it; default: random sources of another size, one per group of two
    images). Checks: N finite scores (and sub-scores), the same for the same inputs, a batch of one works, and a
    reward that reads conditions scores each sample with its own (a reordered batch reorders the scores).
    """

    spec_class: ClassVar[type[RewardSpec]] = RewardSpec

    @pytest.fixture
    def images(self) -> np.ndarray:
        return np.random.default_rng(0).integers(0, 256, size=(4, 64, 64, 3), dtype=np.uint8)

    @pytest.fixture
    def prompts(self, images: np.ndarray) -> list[str]:
        return [f'a photo of {n} cats with the text "omni {n}"' for n in range(len(images))]

    @pytest.fixture
    def metadata(self, images: np.ndarray) -> list[dict[str, Any]]:
        return [{} for _ in range(len(images))]

    @pytest.fixture
    def conditions(self, images: np.ndarray) -> list[tuple[np.ndarray, ...]]:
        """Two images per source, as the samples of a group share theirs; sized unlike the images (an edit's
        source is rarely the output's size)."""
        rng = np.random.default_rng(1)
        sources = [rng.integers(0, 256, size=(48, 40, 3), dtype=np.uint8) for _ in range((len(images) + 1) // 2)]
        return [(sources[i // 2],) for i in range(len(images))]

    def _score(
        self,
        reward: RewardModel,
        images: np.ndarray,
        prompts: Sequence[str],
        metadata: Sequence[Mapping[str, Any]],
        conditions: Sequence[tuple[np.ndarray, ...]] = (),
    ) -> RewardResult:
        """The reward's result, called as the core calls it: with ``conditions=`` when it reads them."""
        return RewardResult.coerce(call_reward(reward, images, prompts, metadata, conditions))

    def test_is_a_reward_model(self, component: Any) -> None:
        assert isinstance(component, RewardModel)

    def test_one_finite_score_per_image(
        self,
        component: RewardModel,
        images: np.ndarray,
        prompts: list[str],
        metadata: list[dict[str, Any]],
        conditions: list[tuple[np.ndarray, ...]],
    ) -> None:
        result = self._score(component, images, prompts, metadata, conditions)
        scores = np.asarray(result.scores, dtype=np.float64)
        assert scores.shape == (len(images),)
        assert np.isfinite(scores).all()
        for name, values in result.details.items():
            values = np.asarray(values, dtype=np.float64)
            assert values.shape == (len(images),), name
            # NaN marks a sample a sub-score does not apply to (the metric averages the others); never infinite
            assert not np.isinf(values).any(), name

    def test_same_inputs_same_scores(
        self,
        component: RewardModel,
        images: np.ndarray,
        prompts: list[str],
        metadata: list[dict[str, Any]],
        conditions: list[tuple[np.ndarray, ...]],
    ) -> None:
        first = self._score(component, images, prompts, metadata, conditions).scores
        second = self._score(component, images, prompts, metadata, conditions).scores
        np.testing.assert_allclose(second, first)

    def test_a_batch_of_one(
        self,
        component: RewardModel,
        images: np.ndarray,
        prompts: list[str],
        metadata: list[dict[str, Any]],
        conditions: list[tuple[np.ndarray, ...]],
    ) -> None:
        result = self._score(component, images[:1], prompts[:1], metadata[:1], conditions[:1])
        assert np.asarray(result.scores).shape == (1,)

    def test_conditions_stay_with_their_samples(
        self,
        component: RewardModel,
        images: np.ndarray,
        prompts: list[str],
        metadata: list[dict[str, Any]],
        conditions: list[tuple[np.ndarray, ...]],
    ) -> None:
        if not reads_conditions(component):
            pytest.skip("the reward does not read condition images")
        assert len(conditions) == len(images)
        order = np.arange(len(images))[::-1]
        forward = self._score(component, images, prompts, metadata, conditions).scores
        backward = self._score(
            component,
            images[order],
            [prompts[i] for i in order],
            [metadata[i] for i in order],
            [conditions[i] for i in order],
        ).scores
        np.testing.assert_allclose(np.asarray(backward), np.asarray(forward)[order], rtol=1e-5, atol=1e-6)
