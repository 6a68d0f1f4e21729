"""omni-rl's conformance suites on the awm loss, its preset and its hooks module.

The loss is a forward-process loss, so the suite needs its inputs: a batch whose policy views are a linear toy
"model" (v = θ_view · x_t, θ the leaf the gradient must reach), with per-sample generators.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
import torch
from awm_toys import LinearViews, forward_inputs
from omni_rl_awm import hooks

from omni_rl.registry import Registry
from omni_rl.specs import AlgorithmSpec, LossSpec
from omni_rl.testing import AlgorithmConformance, LossConformance, PluginConformance


class TestAWMPlugin(PluginConformance):
    @pytest.fixture
    def hooks_module(self) -> str:
        return "omni_rl_awm.hooks"


class TestAWMLoss(LossConformance):
    @pytest.fixture
    def spec(self) -> LossSpec:
        return next(spec for spec in hooks.omni_rl_losses() if spec.name == "awm")

    @pytest.fixture(
        params=[
            {},
            {"weighting": "t", "kl_coef": 0.1, "ema_coef": 1.0, "advantage_max": 1.0},
            {"weighting": "t_squared", "time_sampling": "logit_normal", "timesteps": 2},
            {"weighting": "uniform", "time_range": [0.0, 1.0], "time_shift": 1.0},
            {"time_sampling": "discrete", "schedule_steps": 10, "clip_ratio": 1e-4, "kl_coef": 0.01},
        ],
        ids=["defaults", "kl-ema", "logit-normal", "uniform", "discrete"],
    )
    def options(self, request: pytest.FixtureRequest) -> dict[str, Any]:
        return request.param

    @pytest.fixture
    def loss_inputs(self, component: Any) -> Any:
        generator = torch.Generator().manual_seed(0)
        n = self.batch_size
        x0 = torch.randn((n, *self.latent_shape), generator=generator)
        advantages = torch.randn(n, generator=generator)
        # old close enough to the current policy that the tight clip of the "discrete" case leaves a gradient
        model = LinearViews(0.3, old=0.3 + 1e-6, reference=0.2, ema=0.32)
        return forward_inputs(model, x0, advantages, timestep_index=component.requirements.timesteps - 1)

    def gradient_leaves(self, loss_inputs: Any) -> list[Any]:
        return [loss_inputs.velocity.theta]

    def test_views_follow_the_coefficients(self, component: Any, options: dict[str, Any]) -> None:
        views = component.requirements.views
        assert ("reference" in views) == (options.get("kl_coef", 0) > 0)
        assert ("ema" in views) == (options.get("ema_coef", 0) > 0)
        assert "old" in views

    def test_the_loss_evaluates_exactly_the_declared_views(self, component: Any, loss_inputs: Any) -> None:
        component(loss_inputs)
        assert set(loss_inputs.velocity.views_called()) == component.requirements.views


class TestAWMAlgorithm(AlgorithmConformance):
    complete_with: ClassVar[dict[str, Any]] = {
        "model": {"name": "sd3", "options": {"path": "unused/by/resolution"}},
        "reward": [{"name": "jpeg_compressibility"}],
    }

    @pytest.fixture
    def spec(self) -> AlgorithmSpec:
        return next(spec for spec in hooks.omni_rl_algorithms() if spec.name == "awm")

    def test_the_preset_sets_the_reference_learning_rate(self, spec: AlgorithmSpec, registry: Registry) -> None:
        assert self.resolved_preset(spec, registry).file.optim.lr == 3e-4
