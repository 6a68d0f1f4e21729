"""The conformance suites pass on correct components (the toys) and catch broken ones."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest
from core_toys import ToyModel, ToyModelConfig, ToySampler, ToySamplerConfig, toy_specs

from omni_rl.registry import Registry
from omni_rl.specs import ComponentSpec
from omni_rl.testing import (
    AdvantageConformance,
    AlgorithmConformance,
    LossConformance,
    ModelConformance,
    RewardConformance,
    RolloutConformance,
    SamplerConformance,
)

pytest_plugins = ["pytester"]

SPECS = toy_specs()


class TestToyModel(ModelConformance):
    @pytest.fixture
    def spec(self) -> ComponentSpec:
        return SPECS["model"]


class TestToySampler(SamplerConformance):
    @pytest.fixture
    def spec(self) -> ComponentSpec:
        return SPECS["sampler"]


class TestToyDeterministicSampler(SamplerConformance):
    @pytest.fixture
    def spec(self) -> ComponentSpec:
        return SPECS["sampler"]

    @pytest.fixture
    def options(self) -> dict[str, Any]:
        return {"noise_level": 0.0}


class TestToyRollout(RolloutConformance):
    @pytest.fixture
    def spec(self) -> ComponentSpec:
        return SPECS["rollout"]

    @pytest.fixture
    def model(self) -> ToyModel:
        return ToyModel(ToyModelConfig())

    @pytest.fixture
    def sampler(self) -> ToySampler:
        return ToySampler(ToySamplerConfig())


class TestToyReward(RewardConformance):
    @pytest.fixture
    def spec(self) -> ComponentSpec:
        return SPECS["reward"]


class TestToyAdvantage(AdvantageConformance):
    @pytest.fixture
    def spec(self) -> ComponentSpec:
        return SPECS["advantage"]


class TestToyLoss(LossConformance):
    @pytest.fixture
    def spec(self) -> ComponentSpec:
        return SPECS["loss"]


class TestToyPreset(AlgorithmConformance):
    @pytest.fixture
    def spec(self) -> ComponentSpec:
        return SPECS["algorithm"]

    @pytest.fixture
    def registry(self, toy_registry: Registry) -> Registry:
        return toy_registry


# -- the suites fail where a component breaks its protocol ------------------------------------------------

BROKEN_SAMPLER = """
    import pytest
    from core_toys import ToySampler, toy_specs
    from omni_rl import SamplerSpec
    from omni_rl.testing import SamplerConformance

    class IgnoresPrevSample(ToySampler):
        def step(self, x, velocity, sigma, sigma_next, *, sigma_max=None, noise=None, prev_sample=None):
            return super().step(x, velocity, sigma, sigma_next, sigma_max=sigma_max, noise=noise)

    class TestBroken(SamplerConformance):
        @pytest.fixture
        def spec(self):
            good = toy_specs()["sampler"]
            return SamplerSpec(name="broken", factory=lambda c, ctx: IgnoresPrevSample(c), config=good.config,
                               summary="re-draws instead of re-scoring")
"""

BROKEN_LOSS = """
    import pytest
    import torch
    from core_toys import ToyLoss, toy_specs
    from omni_rl import LossSpec
    from omni_rl.batch import LossOutput
    from omni_rl.testing import LossConformance

    class Detached(ToyLoss):
        def __call__(self, inputs):
            out = super().__call__(inputs)
            return LossOutput(loss=out.loss.detach(), metrics={"text": "not a number"})

    class TestBroken(LossConformance):
        @pytest.fixture
        def spec(self):
            return LossSpec(name="broken", factory=lambda c, ctx: Detached(c), config=toy_specs()["loss"].config,
                            summary="detached")
"""

BROKEN_SPEC = """
    import attrs
    import pytest
    from omni_rl import RewardSpec
    from omni_rl.testing import RewardConformance

    @attrs.define
    class Mutable:
        scale: float = 1.0

    class TestBroken(RewardConformance):
        @pytest.fixture
        def spec(self):
            return RewardSpec(name="mutable", factory=lambda c, ctx: None, config=Mutable)
"""


def _outcomes(pytester: pytest.Pytester, source: str) -> dict[str, str]:
    pytester.makepyfile(test_broken=textwrap.dedent(source))
    result = pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider")
    return {
        r.nodeid.split("::")[-1]: r.outcome
        for r in result.reprec.getreports("pytest_runtest_logreport")
        if r.when == "call" or r.outcome != "passed"
    }


def test_sampler_suite_catches_a_sampler_that_does_not_rescore(pytester: pytest.Pytester) -> None:
    outcomes = _outcomes(pytester, BROKEN_SAMPLER)
    assert outcomes["test_rescoring_the_sample_reproduces_its_log_prob"] == "failed"
    assert outcomes["test_step_is_shaped_like_x_in_float32"] == "passed"


def test_loss_suite_catches_a_loss_without_gradient_and_bad_metrics(pytester: pytest.Pytester) -> None:
    outcomes = _outcomes(pytester, BROKEN_LOSS)
    assert outcomes["test_loss_is_a_finite_scalar_with_a_gradient"] == "failed"
    assert outcomes["test_metrics_are_finite_numbers"] == "failed"
    assert outcomes["test_requirements_are_valid"] == "passed"


def test_spec_checks_catch_a_mutable_config_and_a_missing_summary(pytester: pytest.Pytester) -> None:
    outcomes = _outcomes(pytester, BROKEN_SPEC)
    assert outcomes["test_config_is_a_frozen_attrs_class"] == "failed"
    assert outcomes["test_spec_has_a_summary"] == "failed"
    assert outcomes["test_spec_names_are_valid"] == "passed"
