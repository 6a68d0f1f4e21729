"""omni-rl's conformance suites on the mix_grpo preset and its hooks module."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from omni_rl_mix_grpo import hooks

from omni_rl.registry import Registry
from omni_rl.specs import AlgorithmSpec
from omni_rl.testing import AlgorithmConformance, PluginConformance


class TestMixGRPOPlugin(PluginConformance):
    @pytest.fixture
    def hooks_module(self) -> str:
        return "omni_rl_mix_grpo.hooks"


class TestMixGRPOAlgorithm(AlgorithmConformance):
    complete_with: ClassVar[dict[str, Any]] = {
        "model": {"name": "sd3", "options": {"path": "unused/by/resolution"}},
        "reward": [{"name": "jpeg_compressibility"}],
    }

    @pytest.fixture
    def spec(self) -> AlgorithmSpec:
        (spec,) = hooks.omni_rl_algorithms()
        return spec

    def test_the_resolved_sampler_slides_and_solves_with_dpm(self, spec: AlgorithmSpec, registry: Registry) -> None:
        sampler = self.resolved_preset(spec, registry).components["sampler"].options
        assert (sampler.window_mode, sampler.ode_solver) == ("progressive", "dpm_solver_2m")
