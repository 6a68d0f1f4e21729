"""The ``rloo`` advantage: hand-computed leave-one-out values, omni-rl's conformance suites on the estimator and
the hooks module, and the installed plugin used by name the way a run uses it (``nox -s contrib`` installs it as
a user would, from its own pyproject)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from omni_rl_rloo import hooks

import omni_rl
from omni_rl.advantage_checks import CheckedEstimator
from omni_rl.config import structure_options
from omni_rl.errors import ConfigError
from omni_rl.specs import AdvantageSpec
from omni_rl.testing import AdvantageConformance, PluginConformance


def _rloo(**options: Any) -> Any:
    return omni_rl.build("advantage", "rloo", options)


def test_each_sample_is_compared_with_the_mean_of_its_groups_other_samples() -> None:
    rewards = torch.tensor([1.0, 2.0, 6.0, 10.0, 20.0])
    groups = torch.tensor([0, 0, 0, 1, 1])
    # group 0: 1 - (2+6)/2 = -3, 2 - (1+6)/2 = -1.5, 6 - (1+2)/2 = 4.5; group 1: 10 - 20, 20 - 10
    assert _rloo()(rewards, groups).tolist() == pytest.approx([-3.0, -1.5, 4.5, -10.0, 10.0])


def test_it_is_grpos_centred_reward_scaled_by_g_over_g_minus_1() -> None:
    rewards = torch.rand(12, generator=torch.Generator().manual_seed(0))
    groups = torch.arange(12) // 4
    centred = rewards - rewards.view(3, 4).mean(dim=1).repeat_interleave(4)
    torch.testing.assert_close(_rloo()(rewards, groups), centred * 4 / 3)


def test_group_std_scaling_and_lone_or_equal_samples_get_zero() -> None:
    rewards = torch.tensor([0.0, 2.0, 5.0, 3.0, 3.0])
    groups = torch.tensor([0, 0, 1, 2, 2])  # group 1 has one sample, group 2 equal rewards
    scaled = _rloo(scale="group_std", eps=0.0)(rewards[:2], groups[:2])
    assert scaled.tolist() == pytest.approx([-2.0, 2.0])  # (0 - 2) / std 1, (2 - 0) / 1
    out = _rloo(scale="group_std")(rewards, groups)
    assert out[2:].tolist() == [0.0, 0.0, 0.0] and out.dtype == torch.float32


def test_bad_options_name_their_path() -> None:
    with pytest.raises(ConfigError, match=r"@ \$\.advantage\.options\.scale"):
        structure_options(_spec(), {"scale": "batch"})


def test_its_output_passes_the_cores_run_time_check() -> None:
    estimator = CheckedEstimator(_rloo())
    assert estimator(torch.tensor([1.0, 3.0]), torch.tensor([0, 0])).tolist() == [-2.0, 2.0]


def _spec() -> AdvantageSpec:
    (spec,) = hooks.omni_rl_advantage_estimators()
    return spec


class TestRLOOPlugin(PluginConformance):
    @pytest.fixture
    def hooks_module(self) -> str:
        return "omni_rl_rloo.hooks"


class TestRLOOAdvantage(AdvantageConformance):
    @pytest.fixture
    def spec(self) -> AdvantageSpec:
        return _spec()

    @pytest.fixture(params=[{}, {"scale": "group_std"}], ids=["none", "group-std"])
    def options(self, request: pytest.FixtureRequest) -> dict[str, Any]:
        return request.param
