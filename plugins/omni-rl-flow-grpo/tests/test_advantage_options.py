"""grpo's ``std_ddof`` and ``aggregate`` options against hand computation with Python floats.

``std_ddof = 1`` is the sample std (VeRL-Omni, DanceGRPO, torch.std); a batch or group of one then has std 0 and
A = 0. ``aggregate`` is read by the trainer through ``reward_aggregation()`` (the sum itself is the core's, tested in
tests/core/train/test_advantage_aggregation.py); ``aggregate = "reward"`` leaves the advantage exactly as before.
"""

from __future__ import annotations

import math

import cattrs
import pytest
import torch
from omni_rl_flow_grpo.advantage import GRPOAdvantage
from omni_rl_flow_grpo.config import GRPOAdvantageConfig

# groups: 0 → {1, 2, 3} (mean 2), 1 → {6, 4} (mean 5), 2 → {5} (a group of one)
REWARDS = [1.0, 6.0, 2.0, 4.0, 3.0, 5.0]
GROUPS = [0, 1, 0, 1, 0, 2]
GROUP_MEAN = [2.0, 5.0, 2.0, 5.0, 2.0, 5.0]


def _grpo(**options) -> GRPOAdvantage:
    return GRPOAdvantage(GRPOAdvantageConfig(**options))


def _advantages(**options) -> list[float]:
    return _grpo(**options)(torch.tensor(REWARDS), torch.tensor(GROUPS)).tolist()


def test_defaults_are_the_population_std_and_the_weighted_reward() -> None:
    config = GRPOAdvantageConfig()
    assert (config.std_ddof, config.aggregate) == (0, "reward")
    assert _grpo().reward_aggregation() == "reward"
    assert _grpo(aggregate="advantage").reward_aggregation() == "advantage"


def test_global_sample_std() -> None:
    batch_mean = sum(REWARDS) / 6  # 3.5
    std = math.sqrt(sum((r - batch_mean) ** 2 for r in REWARDS) / 5)  # n - 1
    expected = [(r - m) / (std + 1e-4) for r, m in zip(REWARDS, GROUP_MEAN, strict=True)]
    assert _advantages(std_ddof=1) == pytest.approx(expected, rel=1e-6)
    assert std == pytest.approx(float(torch.tensor(REWARDS, dtype=torch.float64).std()))  # torch.std's default


def test_per_group_sample_std_and_a_group_of_one() -> None:
    std = {0: 1.0, 1: math.sqrt(2.0), 2: 0.0}  # {1,2,3}: 2/2; {6,4}: 2/1; {5}: no sample std, taken as 0
    expected = [(r - m) / (std[g] + 1e-4) for r, m, g in zip(REWARDS, GROUP_MEAN, GROUPS, strict=True)]
    advantages = _advantages(global_std=False, std_ddof=1)
    assert advantages == pytest.approx(expected, rel=1e-6)
    assert advantages[5] == 0.0 and all(math.isfinite(a) for a in advantages)


def test_sample_std_is_the_population_std_times_sqrt_n_over_n_minus_1() -> None:
    """docs/math.md#grpo-advantages: 15% apart at group size 4 (sqrt(4/3)); eps is negligible against these stds."""
    rewards, groups = torch.tensor([0.0, 1.0, 3.0, 10.0]), torch.tensor([0, 0, 0, 0])
    population = _grpo(global_std=False, eps=1e-12)(rewards, groups)
    sample = _grpo(global_std=False, eps=1e-12, std_ddof=1)(rewards, groups)
    torch.testing.assert_close(population / sample, torch.full((4,), math.sqrt(4 / 3)), rtol=1e-6, atol=0)


def test_a_batch_of_one_has_advantage_zero_with_either_ddof() -> None:
    for options in ({"std_ddof": 1}, {"std_ddof": 1, "global_std": False}, {}):
        assert _grpo(**options)(torch.tensor([3.0]), torch.tensor([0])).tolist() == [0.0]


def test_ddof_is_ignored_without_std_normalisation() -> None:
    assert _advantages(std_normalize=False, std_ddof=1) == [r - m for r, m in zip(REWARDS, GROUP_MEAN, strict=True)]


def test_aggregate_does_not_change_the_estimator_itself() -> None:
    """Aggregation happens in the trainer: one reward in, the same advantage out, bit for bit."""
    for options in ({}, {"global_std": False}, {"std_ddof": 1}):
        assert _advantages(aggregate="advantage", **options) == _advantages(**options)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"std_ddof": 2}, "std_ddof must be 0"),
        ({"std_ddof": True}, "std_ddof must be 0"),
        ({"aggregate": "sum"}, 'aggregate must be "reward"'),
    ],
)
def test_bad_values_name_the_option(options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        GRPOAdvantageConfig(**options)


def test_options_structure_from_toml_values() -> None:
    strict = cattrs.Converter(forbid_extra_keys=True)
    config = strict.structure({"std_ddof": 1, "aggregate": "advantage"}, GRPOAdvantageConfig)
    assert (config.std_ddof, config.aggregate) == (1, "advantage")
