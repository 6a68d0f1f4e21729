"""Pairing (``DPOLoss.prepare``): roles, skipped groups and the N / P weight, against values worked out by hand."""

from __future__ import annotations

import pytest
import torch
from omni_rl_dpo import pairing
from omni_rl_dpo.pairing import GROUPS_SKIPPED, PAIRS, ROLE, WEIGHT, pair_by_reward, pair_in_order

from omni_rl.errors import RuntimeFailure


def test_best_and_worst_of_each_group_with_skipped_groups_counted() -> None:
    # group 0: rewards 0.1, 0.5, 0.3 -> chosen position 1 (0.5), rejected position 0 (0.1)
    # group 1: rewards 2.0, 2.0     -> no spread: skipped
    # group 2: rewards 1.0, -1.0, 1.0, -1.0 -> ties go to the first: chosen 5, rejected 6
    # group 3: one sample (reward 7) -> skipped
    rewards = torch.tensor([0.1, 0.5, 0.3, 2.0, 2.0, 1.0, -1.0, 1.0, -1.0, 7.0])
    group_ids = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2, 3])
    extras = pair_by_reward(rewards, group_ids)
    assert extras[ROLE].tolist() == [-1, 1, 0, 0, 0, 1, -1, 0, 0, 0]
    # N = 10 samples, P = 2 pairs -> weight 10 / 2 = 5 on every sample
    assert extras[WEIGHT].tolist() == [5.0] * 10
    assert extras[PAIRS].tolist() == [2.0] * 10
    assert extras[GROUPS_SKIPPED].tolist() == [2.0] * 10


def test_groups_are_found_by_id_not_by_position() -> None:
    # interleaved groups: group 7 = positions 0, 2 (rewards 3, 1); group 4 = positions 1, 3 (rewards 0, 5)
    extras = pair_by_reward(torch.tensor([3.0, 0.0, 1.0, 5.0]), torch.tensor([7, 4, 7, 4]))
    assert extras[ROLE].tolist() == [1, -1, -1, 1]
    assert extras[WEIGHT].tolist() == [2.0] * 4  # 4 samples / 2 pairs


def test_min_spread_skips_near_ties() -> None:
    # spreads (exact in float32): group 0 = 0.5 - 0.25 = 0.25 (not above 0.25: skipped), group 1 = 1.0 - 0.125
    rewards = torch.tensor([0.25, 0.5, 0.125, 1.0])
    extras = pair_by_reward(rewards, torch.tensor([0, 0, 1, 1]), min_spread=0.25)
    assert extras[ROLE].tolist() == [0, 0, -1, 1]
    assert extras[GROUPS_SKIPPED][0] == 1.0
    assert extras[WEIGHT][0] == 4.0  # 4 / 1


def test_no_pairs_gives_zero_weight() -> None:
    extras = pair_by_reward(torch.tensor([1.0, 1.0, 3.0]), torch.tensor([0, 0, 1]))
    assert extras[ROLE].tolist() == [0, 0, 0]
    assert extras[WEIGHT].tolist() == [0.0] * 3
    assert extras[PAIRS][0] == 0.0 and extras[GROUPS_SKIPPED][0] == 2.0


def test_non_finite_rewards_are_refused() -> None:
    with pytest.raises(RuntimeFailure, match="NaN or infinite") as info:
        pair_by_reward(torch.tensor([1.0, float("nan")]), torch.tensor([0, 0]))
    assert info.value.hint


def test_offline_pairs_are_first_chosen_second_rejected() -> None:
    extras = pair_in_order(torch.tensor([0, 0, 1, 1, 2, 2]))
    assert extras[ROLE].tolist() == [1, -1, 1, -1, 1, -1]
    assert extras[WEIGHT].tolist() == [2.0] * 6  # 6 samples / 3 pairs
    assert extras[GROUPS_SKIPPED][0] == 0.0


def test_offline_pairing_needs_groups_of_two() -> None:
    with pytest.raises(RuntimeFailure, match="exactly 2") as info:
        pair_in_order(torch.tensor([0, 0, 0, 1, 1]))
    assert "preference_pairs" in (info.value.hint or "")


def test_all_pairs_take_every_higher_lower_pair_of_a_group() -> None:
    rewards = torch.tensor([0.1, 0.5, 0.5, 0.9, 2.0, 2.0])
    extras = pairing.pair_all_by_reward(rewards, torch.tensor([0, 0, 0, 0, 1, 1]))
    # group 0: 0.5 > 0.1 twice, 0.9 above the other three; the tie 0.5 = 0.5 is no pair; group 1 is all ties
    assert pairing.all_pairs_of([0.1, 0.5, 0.5, 0.9], min_spread=0.0) == [(1, 0), (2, 0), (3, 0), (3, 1), (3, 2)]
    assert extras[pairing.ROLE].tolist() == [pairing.PAIRED] * 4 + [pairing.UNUSED] * 2
    assert extras[pairing.PAIRS][0] == 5.0 and extras[pairing.GROUPS_SKIPPED][0] == 1.0
    assert extras[pairing.WEIGHT][0] == pytest.approx(6 / 5)
    assert extras[pairing.GROUP_PAIRED].tolist() == [4.0] * 4 + [0.0] * 2


def test_all_pairs_drop_pairs_within_the_min_spread() -> None:
    assert pairing.all_pairs_of([0.1, 0.5, 0.55], min_spread=0.1) == [(1, 0), (2, 0)]
    extras = pairing.pair_all_by_reward(torch.tensor([0.1, 0.5, 0.55]), torch.tensor([0, 0, 0]), min_spread=0.1)
    assert extras[pairing.PAIRS][0] == 2.0
