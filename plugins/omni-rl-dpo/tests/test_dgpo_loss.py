"""The ``dgpo`` loss (docs/math.md#dgpo-loss) against hand computations on the linear stand-in policy of
test_dpo_loss, and its reduction to a DPO pair for a group of two."""

from __future__ import annotations

import math

import pytest
import torch
from omni_rl_dpo.config import DGPOLossConfig, DPOLossConfig
from omni_rl_dpo.dgpo import DGPOLoss, group_weights
from omni_rl_dpo.loss import DPOLoss
from test_dpo_loss import BETA, SEEDS, X0, LinearPolicy, hand_pair
from test_dpo_options import hand_draws, hand_errors

from omni_rl.batch import ForwardLossInputs


def dgpo_inputs(loss: DGPOLoss, policy: LinearPolicy, advantages: list[float], groups: list[int], idx: list[int]):
    extras = loss.prepare(torch.tensor(advantages), torch.tensor(advantages), torch.tensor(groups))
    x0 = torch.tensor([X0[i % len(X0)] for i in range(len(groups))]).reshape(len(groups), 1, 1, 2)
    pick = torch.tensor(idx)
    return ForwardLossInputs(
        x0=x0[pick],
        advantages=torch.tensor(advantages)[pick],
        rewards=torch.tensor(advantages)[pick],
        group_ids=torch.tensor(groups)[pick],
        generators=[torch.Generator().manual_seed(SEEDS[i % len(SEEDS)]) for i in idx],
        velocity=policy,
        extras={k: v[pick] for k, v in extras.items()},
    )


def test_group_weights() -> None:
    advantages = torch.tensor([1.0, -0.5, -0.5, 0.0, 0.0, 2.0, -2.0])
    out = group_weights(advantages, torch.tensor([0, 0, 0, 1, 1, 2, 2]), min_spread=1e-6)
    torch.testing.assert_close(out["dgpo_weight"], torch.tensor([1.0, -0.5, -0.5, 0.0, 0.0, 1.0, -1.0]))
    # N / G = 7 / 2 on the kept groups' members
    torch.testing.assert_close(out["dgpo_scale"], torch.tensor([3.5, 3.5, 3.5, 0.0, 0.0, 3.5, 3.5]))
    assert out["dgpo_groups"][0] == 2.0 and out["dgpo_groups_skipped"][0] == 1.0


def test_a_group_of_three_matches_the_hand_computation() -> None:
    loss = DGPOLoss(DGPOLossConfig(beta=BETA, sft_weight=0.2))
    policy = LinearPolicy()
    out = loss(dgpo_inputs(loss, policy, [1.0, -0.5, -0.5], [0, 0, 0], [0, 1, 2]))
    draws = hand_draws(SEEDS[0], 1)  # the group's one draw, from its first member's generator
    weights = [1.0, -0.5, -0.5]
    errs = [hand_errors(draws, X0[i]) for i in range(3)]
    inside = -(BETA / 2) * sum(w * (et - er) for w, (et, er, _, _) in zip(weights, errs, strict=True))
    sft = 0.2 * errs[0][0]
    assert out.loss.item() == pytest.approx(math.log1p(math.exp(-inside)) + sft, rel=1e-5)
    out.loss.backward()
    sig = 1.0 / (1.0 + math.exp(inside))
    grad = sig * (BETA / 2) * sum(w * de for w, (_, _, de, _) in zip(weights, errs, strict=True)) + 0.2 * errs[0][2]
    assert policy.a.grad.item() == pytest.approx(grad, rel=1e-4)
    assert out.metrics["reward_margin"] == pytest.approx(inside, rel=1e-5)
    assert out.metrics["chosen_error_delta"] == pytest.approx(errs[0][0] - errs[0][1], rel=1e-4, abs=1e-6)
    rejected = sum(0.5 * (errs[i][0] - errs[i][1]) for i in (1, 2))
    assert out.metrics["rejected_error_delta"] == pytest.approx(rejected, rel=1e-4, abs=1e-6)
    assert out.metrics["policy_mse"] == pytest.approx(sum(e[0] for e in errs) / 3, rel=1e-5)
    assert out.metrics["groups"] == 1.0
    # one forward of the group's three samples at one shared t
    _, _, sigma, samples = policy.calls[0]
    assert samples.tolist() == [0, 1, 2] and torch.allclose(sigma, sigma[:1].expand(3))


def test_a_group_of_two_is_a_dpo_pair() -> None:
    dgpo = DGPOLoss(DGPOLossConfig(beta=BETA))
    out = dgpo(dgpo_inputs(dgpo, LinearPolicy(), [0.7, -0.7], [0, 0], [0, 1]))
    assert out.loss.item() == pytest.approx(hand_pair(SEEDS[0], X0[0], X0[1])["loss"], rel=1e-5)
    dpo = DPOLoss(DPOLossConfig(beta=BETA))
    from test_dpo_loss import make_inputs

    assert dpo(make_inputs(dpo, LinearPolicy(), [0.7, -0.7], [0, 0], [0, 1])).loss.item() == pytest.approx(
        out.loss.item(), rel=1e-6
    )


def test_micro_batches_combine_and_flat_groups_are_skipped() -> None:
    loss = DGPOLoss(DGPOLossConfig(beta=BETA))
    adv, groups = [1.0, -1.0, 0.0, 0.0, 0.5, -1.0, 0.5], [0, 0, 1, 1, 2, 2, 2]
    whole = loss(dgpo_inputs(loss, LinearPolicy(), adv, groups, list(range(7))))
    parts = [loss(dgpo_inputs(loss, LinearPolicy(), adv, groups, idx)) for idx in ([0, 1], [2, 3], [4, 5, 6])]
    sizes = [2, 2, 3]
    combined_loss = sum(p.loss.item() * b / 7 for p, b in zip(parts, sizes, strict=True))
    assert combined_loss == pytest.approx(whole.loss.item(), rel=1e-6)
    for key, value in whole.metrics.items():
        combined = sum(p.metrics[key] * b for p, b in zip(parts, sizes, strict=True)) / 7
        assert combined == pytest.approx(value, rel=1e-6, abs=1e-7), key
    assert whole.metrics["groups"] == 2.0 and whole.metrics["groups_skipped"] == 1.0
    assert parts[1].loss.item() == 0.0 and parts[1].loss.requires_grad


def test_policy_equal_to_reference_gives_log_2() -> None:
    loss = DGPOLoss(DGPOLossConfig(beta=BETA))
    out = loss(dgpo_inputs(loss, LinearPolicy(a=0.4), [1.0, -0.5, -0.5], [0, 0, 0], [0, 1, 2]))
    assert out.loss.item() == pytest.approx(math.log(2.0), rel=1e-6)


def test_requirements_and_reference_modes() -> None:
    req = DGPOLoss(DGPOLossConfig(reference="ema", timesteps=2)).requirements
    assert req.batch_unit == "group" and req.timesteps == 2 and req.views == frozenset({"current", "ema"})
    assert DGPOLoss(DGPOLossConfig()).requirements.views == frozenset({"current", "reference"})
