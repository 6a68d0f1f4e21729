"""omni-rl's conformance suites on dance_sde, the dance_grpo preset and the hooks module."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from omni_rl_dance_grpo import hooks

from omni_rl.registry import Registry
from omni_rl.specs import AlgorithmSpec, SamplerSpec
from omni_rl.testing import AlgorithmConformance, PluginConformance, SamplerConformance


class TestDanceGRPOPlugin(PluginConformance):
    @pytest.fixture
    def hooks_module(self) -> str:
        return "omni_rl_dance_grpo.hooks"


class TestDanceSDESampler(SamplerConformance):
    """The suite on three option sets: the preset's sampler (every step but the last, 60% of them trained per
    sample); a random 3-step window with a large η, as the shapes example uses; and η = 0, documented as the Euler
    step, which the suite checks as a deterministic sampler."""

    @pytest.fixture
    def spec(self) -> SamplerSpec:
        (spec,) = hooks.omni_rl_samplers()
        return spec

    @pytest.fixture(
        params=[
            {"noise_level": 0.3, "window_size": 0, "timestep_fraction": 0.6},
            {"noise_level": 4.0, "window_size": 3, "window_range": [0, 6], "timestep_fraction": 0.5},
            {"noise_level": 0.0},
        ],
        ids=["preset", "in-a-window", "without-noise"],
    )
    def options(self, request: pytest.FixtureRequest) -> dict[str, Any]:
        return request.param


class TestDanceGRPOAlgorithm(AlgorithmConformance):
    complete_with: ClassVar[dict[str, Any]] = {
        "model": {"name": "sd3", "options": {"path": "unused/by/resolution"}},
        "reward": [{"name": "jpeg_compressibility"}],
    }

    @pytest.fixture
    def spec(self) -> AlgorithmSpec:
        (spec,) = hooks.omni_rl_algorithms()
        return spec

    def test_the_resolved_preset_trains_a_fraction_with_shared_noise(
        self, spec: AlgorithmSpec, registry: Registry
    ) -> None:
        components = self.resolved_preset(spec, registry).components
        sampler, rollout = components["sampler"].options, components["rollout"].options
        assert (components["sampler"].name, sampler.timestep_fraction, sampler.window_size) == ("dance_sde", 0.6, 0)
        assert rollout.shared_initial_noise
        advantage = components["advantage"].options
        assert (advantage.std_ddof, advantage.aggregate, advantage.global_std) == (1, "advantage", False)
