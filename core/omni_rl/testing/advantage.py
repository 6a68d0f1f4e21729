"""Conformance suite for advantage estimators (:class:`omni_rl.protocols.AdvantageEstimator`)."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from omni_rl.protocols import AdvantageEstimator
from omni_rl.specs import AdvantageSpec
from omni_rl.testing._base import SpecConformance, torch_module


class AdvantageConformance(SpecConformance):
    """Subclass with a ``spec`` fixture (see :class:`SpecConformance` for ``options`` and ``component``).

    Checks: one finite float advantage per sample; zero mean within each group whose rewards differ (set
    ``zero_mean_per_group = False`` for an estimator that is not group-relative); finite when a group's
    rewards are all equal; permuting the samples permutes the advantages; the optional ``reward_aggregation()``
    returns ``"reward"`` or ``"advantage"``.
    """

    spec_class: ClassVar[type[AdvantageSpec]] = AdvantageSpec
    zero_mean_per_group: ClassVar[bool] = True

    def _batch(self) -> tuple[Any, Any]:
        torch = torch_module()
        rewards = torch.tensor([0.1, 0.9, 0.5, 0.3, 2.0, 1.0, 3.0, 1.5])
        group_ids = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
        return rewards, group_ids

    def test_is_an_advantage_estimator(self, component: Any) -> None:
        assert isinstance(component, AdvantageEstimator)

    def test_one_finite_advantage_per_sample(self, component: AdvantageEstimator) -> None:
        torch = torch_module()
        rewards, group_ids = self._batch()
        advantages = component(rewards, group_ids)
        assert advantages.shape == rewards.shape
        assert advantages.is_floating_point()
        assert torch.isfinite(advantages).all()

    def test_zero_mean_per_group(self, component: AdvantageEstimator) -> None:
        if not self.zero_mean_per_group:
            pytest.skip("zero_mean_per_group = False")
        torch = torch_module()
        rewards, group_ids = self._batch()
        advantages = component(rewards, group_ids)
        for group in group_ids.unique():
            mean = advantages[group_ids == group].mean()
            torch.testing.assert_close(mean, torch.zeros_like(mean), rtol=0, atol=1e-5)

    def test_equal_rewards_give_finite_advantages(self, component: AdvantageEstimator) -> None:
        torch = torch_module()
        rewards = torch.tensor([0.5, 0.5, 0.5, 0.5, 1.0, 2.0, 3.0, 4.0])
        _, group_ids = self._batch()
        assert torch.isfinite(component(rewards, group_ids)).all()

    def test_permuting_samples_permutes_advantages(self, component: AdvantageEstimator) -> None:
        torch = torch_module()
        rewards, group_ids = self._batch()
        permutation = torch.tensor([5, 2, 7, 0, 3, 6, 1, 4])
        expected = component(rewards, group_ids)[permutation]
        torch.testing.assert_close(component(rewards[permutation], group_ids[permutation]), expected)

    def test_reward_aggregation_is_reward_or_advantage(self, component: AdvantageEstimator) -> None:
        member = getattr(component, "reward_aggregation", None)
        if member is None:
            pytest.skip("no reward_aggregation member: several rewards are summed before the estimator")
        assert member() in ("reward", "advantage")
