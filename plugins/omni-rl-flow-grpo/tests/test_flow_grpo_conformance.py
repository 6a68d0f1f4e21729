"""omni-rl's conformance suites run on every component of omni-rl-flow-grpo, and on its hooks module.

The suites are the contract the trainer relies on (shapes, dtypes, re-scoring, gradients, config round
trips); running them here catches a component that drifts from it before a run does.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from omni_rl_flow_grpo import hooks

from omni_rl.specs import AdvantageSpec, AlgorithmSpec, ComponentSpec, LossSpec, SamplerSpec
from omni_rl.testing import (
    AdvantageConformance,
    AlgorithmConformance,
    LossConformance,
    PluginConformance,
    SamplerConformance,
)


def _named(records: list[Any], name: str) -> Any:
    """The record called ``name`` (by name, so a reordering of the hook's list cannot swap the suites)."""
    (spec,) = [record for record in records if record.name == name]
    return spec


class TestFlowGRPOPlugin(PluginConformance):
    @pytest.fixture
    def hooks_module(self) -> str:
        return "omni_rl_flow_grpo.hooks"


# -- samplers --------------------------------------------------------------------------------------------


class TestFlowSDESampler(SamplerConformance):
    @pytest.fixture
    def spec(self) -> SamplerSpec:
        return _named(hooks.omni_rl_samplers(), "flow_sde")

    @pytest.fixture
    def options(self) -> dict[str, Any]:
        """The preset's window (2 steps drawn in [0, 5)), so the window test covers the random draw."""
        return {"noise_level": 0.7, "window_size": 2, "window_range": [0, 5], "window_mode": "random"}


class TestFlowSDESamplerDefaults(SamplerConformance):
    """Default options: the window is every step but the last."""

    @pytest.fixture
    def spec(self) -> SamplerSpec:
        return _named(hooks.omni_rl_samplers(), "flow_sde")


class TestFlowSDESamplerWithoutNoise(SamplerConformance):
    """noise_level = 0 is documented as the deterministic Euler step: the suite checks it as one."""

    @pytest.fixture
    def spec(self) -> SamplerSpec:
        return _named(hooks.omni_rl_samplers(), "flow_sde")

    @pytest.fixture
    def options(self) -> dict[str, Any]:
        return {"noise_level": 0.0}


class TestCPSSampler(SamplerConformance):
    @pytest.fixture
    def spec(self) -> SamplerSpec:
        return _named(hooks.omni_rl_samplers(), "cps")

    @pytest.fixture
    def options(self) -> dict[str, Any]:
        return {"noise_level": 0.8, "window_size": 3, "window_range": [1, 6], "window_mode": "fixed"}


class TestCPSSamplerWithoutNoise(SamplerConformance):
    @pytest.fixture
    def spec(self) -> SamplerSpec:
        return _named(hooks.omni_rl_samplers(), "cps")

    @pytest.fixture
    def options(self) -> dict[str, Any]:
        return {"noise_level": 0.0}


class TestODESampler(SamplerConformance):
    @pytest.fixture
    def spec(self) -> SamplerSpec:
        return _named(hooks.omni_rl_samplers(), "ode")


# -- advantage, loss, algorithm --------------------------------------------------------------------------


class TestGRPOAdvantage(AdvantageConformance):
    @pytest.fixture
    def spec(self) -> AdvantageSpec:
        return _named(hooks.omni_rl_advantage_estimators(), "grpo")

    @pytest.fixture(
        params=[
            {},
            {"global_std": False},
            {"std_normalize": False},
        ],
        ids=["global-std", "group-std", "dr-grpo"],
    )
    def options(self, request: pytest.FixtureRequest) -> dict[str, Any]:
        """Every normalisation mode is group-relative, so each must pass the zero-mean check."""
        return request.param


class TestFlowGRPOLoss(LossConformance):
    @pytest.fixture
    def spec(self) -> LossSpec:
        return _named(hooks.omni_rl_losses(), "flow_grpo")

    @pytest.fixture(params=[0.0, 0.04], ids=["no-kl", "kl"])
    def options(self, request: pytest.FixtureRequest) -> dict[str, Any]:
        """kl_coef > 0 adds the reference view to the requirements and the KL term to the loss."""
        return {"kl_coef": request.param}

    def test_kl_coef_selects_the_reference_view(self, component: Any, options: dict[str, Any]) -> None:
        """The suite builds the views the loss asks for: check the KL variant really asks for the reference."""
        assert ("reference" in component.requirements.views) == (options["kl_coef"] > 0)


class TestFlowGRPOAlgorithm(AlgorithmConformance):
    complete_with: ClassVar[dict[str, Any]] = {
        "model": {"name": "sd3", "options": {"path": "unused/by/resolution"}},
        "reward": [{"name": "jpeg_compressibility"}],
    }

    @pytest.fixture
    def spec(self) -> AlgorithmSpec:
        return _named(hooks.omni_rl_algorithms(), "flow_grpo")


def test_every_component_has_a_suite() -> None:
    """A component added to hooks.py without a suite above fails here rather than going unchecked."""
    covered = {
        "omni_rl_samplers": {"flow_sde", "cps", "ode"},
        "omni_rl_advantage_estimators": {"grpo"},
        "omni_rl_losses": {"flow_grpo"},
        "omni_rl_algorithms": {"flow_grpo"},
    }
    for hook, names in covered.items():
        records: list[ComponentSpec] = getattr(hooks, hook)()
        assert {record.name for record in records} == names, hook
