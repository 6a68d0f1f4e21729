"""omni-rl's conformance suites on the flow_dppo loss, its preset and its hooks module.

The suite's default trajectory inputs carry no std of x' (``SamplerStep.scale``), which the trust region's KL
needs: these inputs add one per sample, as flow_sde and cps report it.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
import torch
from omni_rl_flow_dppo import hooks

from omni_rl.specs import AlgorithmSpec, LossSpec
from omni_rl.testing import AlgorithmConformance, LossConformance, PluginConformance


class TestFlowDPPOPlugin(PluginConformance):
    @pytest.fixture
    def hooks_module(self) -> str:
        return "omni_rl_flow_dppo.hooks"


class TestFlowDPPOLoss(LossConformance):
    @pytest.fixture
    def spec(self) -> LossSpec:
        (spec,) = hooks.omni_rl_losses()
        return spec

    @pytest.fixture(
        params=[{}, {"kl_coef": 0.04}, {"kl_mask_threshold": 1e-2}], ids=["defaults", "kl", "wide-trust-region"]
    )
    def options(self, request: pytest.FixtureRequest) -> dict[str, Any]:
        return request.param

    def trajectory_inputs(self, loss: Any, *, advantages: Any = None, policy_change: float = 0.05) -> Any:
        inputs = super().trajectory_inputs(loss, advantages=advantages, policy_change=policy_change)
        for view in (inputs.current, inputs.old, inputs.reference):
            if view is not None:
                view.scale = torch.full((self.batch_size,), 0.3)
        return inputs

    def test_the_old_view_is_always_asked_for(self, component: Any, options: dict[str, Any]) -> None:
        assert "old" in component.requirements.views
        assert ("reference" in component.requirements.views) == (options.get("kl_coef", 0) > 0)


class TestFlowDPPOAlgorithm(AlgorithmConformance):
    complete_with: ClassVar[dict[str, Any]] = {
        "model": {"name": "sd3", "options": {"path": "unused/by/resolution"}},
        "reward": [{"name": "jpeg_compressibility"}],
    }

    @pytest.fixture
    def spec(self) -> AlgorithmSpec:
        (spec,) = hooks.omni_rl_algorithms()
        return spec
