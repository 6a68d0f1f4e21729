"""Conformance suite for reward models (:class:`omni_rl.protocols.RewardModel`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import pytest

from omni_rl.batch import RewardResult
from omni_rl.protocols import RewardModel
from omni_rl.specs import RewardSpec
from omni_rl.testing._base import SpecConformance


class RewardConformance(SpecConformance):
    """Subclass with a ``spec`` fixture (see :class:`SpecConformance` for ``options`` and ``component``).

    Optional fixtures: ``images`` (uint8, (N, H, W, 3); default 4 random 64×64 images), ``prompts`` and
    ``metadata`` (one per image). Checks: N finite scores (and sub-scores), the same for the same inputs, and
    a batch of one works.
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

    def _score(
        self,
        reward: RewardModel,
        images: np.ndarray,
        prompts: Sequence[str],
        metadata: Sequence[Mapping[str, Any]],
    ) -> RewardResult:
        return RewardResult.coerce(reward(images, prompts, metadata))

    def test_is_a_reward_model(self, component: Any) -> None:
        assert isinstance(component, RewardModel)

    def test_one_finite_score_per_image(
        self, component: RewardModel, images: np.ndarray, prompts: list[str], metadata: list[dict[str, Any]]
    ) -> None:
        result = self._score(component, images, prompts, metadata)
        scores = np.asarray(result.scores, dtype=np.float64)
        assert scores.shape == (len(images),)
        assert np.isfinite(scores).all()
        for name, values in result.details.items():
            values = np.asarray(values, dtype=np.float64)
            assert values.shape == (len(images),), name
            # NaN marks a sample a sub-score does not apply to (the metric averages the others); never infinite
            assert not np.isinf(values).any(), name

    def test_same_inputs_same_scores(
        self, component: RewardModel, images: np.ndarray, prompts: list[str], metadata: list[dict[str, Any]]
    ) -> None:
        first = self._score(component, images, prompts, metadata).scores
        second = self._score(component, images, prompts, metadata).scores
        np.testing.assert_allclose(second, first)

    def test_a_batch_of_one(
        self, component: RewardModel, images: np.ndarray, prompts: list[str], metadata: list[dict[str, Any]]
    ) -> None:
        result = self._score(component, images[:1], prompts[:1], metadata[:1])
        assert np.asarray(result.scores).shape == (1,)
