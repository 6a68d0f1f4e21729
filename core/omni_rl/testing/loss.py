"""Conformance suite for losses (:class:`omni_rl.protocols.Loss`)."""

from __future__ import annotations

import numbers
from typing import Any, ClassVar, get_args

import pytest

from omni_rl.batch import LossOutput, SamplerStep, TrajectoryLossInputs
from omni_rl.protocols import Loss, LossRequirements, View
from omni_rl.specs import LossSpec
from omni_rl.testing._base import SpecConformance, torch_module

#: every view the update engines evaluate (protocols.View): "ema" is a named adapter like "old"
VIEWS = frozenset(get_args(View))


class LossConformance(SpecConformance):
    """Subclass with a ``spec`` fixture (see :class:`SpecConformance` for ``options`` and ``component``).

    ``loss_inputs`` (optional) is what the loss is called with; by default, for a trajectory loss, a
    :class:`TrajectoryLossInputs` of ``batch_size`` samples whose ``current`` log-prob and mean are leaves
    requiring grad, with the ``old``/``reference`` views the loss asks for and the extras of its ``prepare``.
    A forward-process loss (``requirements.inputs == "forward"``) must provide ``loss_inputs`` (and override
    :meth:`gradient_leaves` to name the tensors its gradient must reach).
    Checks: ``requirements`` is valid; ``prepare`` returns per-sample tensors; the loss is a finite scalar
    with a finite, non-zero gradient; metrics are finite numbers; no advantage and no policy change give a
    finite loss.
    """

    spec_class: ClassVar[type[LossSpec]] = LossSpec
    batch_size: ClassVar[int] = 4
    latent_shape: ClassVar[tuple[int, ...]] = (4, 8, 8)

    @pytest.fixture
    def loss_inputs(self, component: Loss) -> Any:
        if component.requirements.inputs != "trajectory":
            pytest.skip("a forward-process loss: define a `loss_inputs` fixture with the inputs it takes")
        return self.trajectory_inputs(component)

    def trajectory_inputs(self, loss: Loss, *, advantages: Any = None, policy_change: float = 0.05) -> Any:
        """Trajectory-loss inputs of ``batch_size`` samples (seeded), for the default ``loss_inputs``."""
        torch = torch_module()
        generator = torch.Generator().manual_seed(0)
        n = self.batch_size

        def randn(*shape: int) -> Any:
            return torch.randn(shape, generator=generator)

        def view(mean: Any, log_prob: Any) -> SamplerStep:
            return SamplerStep(
                sample=randn(n, *self.latent_shape), mean=mean, std_dev_t=torch.full((n,), 0.5), log_prob=log_prob
            )

        log_prob = (randn(n) * 0.1 - 1.0).requires_grad_(True)
        mean = randn(n, *self.latent_shape).requires_grad_(True)
        advantages = randn(n) if advantages is None else advantages
        views = loss.requirements.views

        def nearby(value: Any) -> Any:
            return value.detach() + policy_change * randn(*value.shape)

        rewards = randn(n)
        group_ids = torch.arange(n) // 2
        return TrajectoryLossInputs(
            current=view(mean, log_prob),
            old_log_prob=nearby(log_prob),
            advantages=advantages,
            old=view(nearby(mean), nearby(log_prob)) if "old" in views else None,
            reference=view(nearby(mean), nearby(log_prob)) if "reference" in views else None,
            sigmas=torch.full((n,), 0.8),
            next_sigmas=torch.full((n,), 0.6),
            extras=dict(loss.prepare(rewards, advantages, group_ids)),
        )

    def gradient_leaves(self, loss_inputs: Any) -> list[Any]:
        """Tensors the loss's gradient must reach: the current view's log-prob and mean by default
        (override for a forward-process loss's own inputs)."""
        current = getattr(loss_inputs, "current", None)
        if current is None:
            return []
        candidates = (current.log_prob, current.mean)
        return [t for t in candidates if t is not None and t.is_leaf and t.requires_grad]

    def test_is_a_loss(self, component: Any) -> None:
        assert isinstance(component, Loss)

    def test_requirements_are_valid(self, component: Loss) -> None:
        requirements = component.requirements
        assert isinstance(requirements, LossRequirements)
        assert requirements.inputs in ("trajectory", "forward")
        assert "current" in requirements.views
        assert requirements.views <= VIEWS, f"unknown views {set(requirements.views - VIEWS)}"

    def test_prepare_returns_per_sample_tensors(self, component: Loss) -> None:
        torch = torch_module()
        n = self.batch_size
        extras = component.prepare(torch.randn(n), torch.randn(n), torch.arange(n) // 2)
        assert isinstance(extras, dict)
        for name, value in extras.items():
            assert isinstance(value, torch.Tensor), name
            assert value.shape[0] == n, name

    def test_loss_is_a_finite_scalar_with_a_gradient(self, component: Loss, loss_inputs: Any) -> None:
        torch = torch_module()
        output = component(loss_inputs)
        assert isinstance(output, LossOutput)
        assert output.loss.ndim == 0
        assert torch.isfinite(output.loss)
        assert output.loss.requires_grad, "the loss must depend on the current policy"
        output.loss.backward()
        leaves = [t for t in self.gradient_leaves(loss_inputs) if t.grad is not None]
        assert leaves, "no gradient reached the current policy's log-prob or mean"
        assert all(torch.isfinite(t.grad).all() for t in leaves)
        assert any(t.grad.abs().sum() > 0 for t in leaves), "the gradient is zero everywhere"

    def test_metrics_are_finite_numbers(self, component: Loss, loss_inputs: Any) -> None:
        torch = torch_module()
        for name, value in component(loss_inputs).metrics.items():
            if isinstance(value, torch.Tensor):
                assert value.ndim == 0, f"metric {name!r} is not a scalar"
                value = value.item()
            assert isinstance(value, numbers.Real), f"metric {name!r} is {type(value).__name__}"
            assert value == value and abs(value) != float("inf"), f"metric {name!r} is {value}"

    def test_no_advantage_and_no_policy_change_is_finite(self, component: Loss) -> None:
        torch = torch_module()
        if component.requirements.inputs != "trajectory":
            pytest.skip("forward-process loss")
        inputs = self.trajectory_inputs(component, advantages=torch.zeros(self.batch_size), policy_change=0.0)
        assert torch.isfinite(component(inputs).loss)
