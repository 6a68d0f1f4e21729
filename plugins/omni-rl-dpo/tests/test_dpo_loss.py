"""The ``dpo`` loss against values worked out by hand with Python floats, on a linear stand-in policy.

The stand-in: the current policy predicts v = a·x_t (a is the trained weight), the reference v = b·x_t. With
tiny latents of two elements, every quantity of docs/math.md#diffusion-dpo-loss (x_t, u, e, inside, the loss, its
gradient in a and the metrics) can be written out term by term below.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from omni_rl_dpo.config import DPOLossConfig
from omni_rl_dpo.loss import DPOLoss, dpo_terms

from omni_rl.batch import ForwardLossInputs
from omni_rl.errors import RuntimeFailure

A, B_REF, BETA = 0.5, 0.4, 10.0
X0 = [[1.0, -1.0], [0.5, 2.0], [0.0, 1.0], [-2.0, 0.5]]
SEEDS = [11, 12, 13, 14]


class LinearPolicy:
    """``inputs.velocity`` for the stand-in policy; records what it was asked to evaluate."""

    def __init__(self, a: float = A, b: float = B_REF) -> None:
        self.a = torch.tensor(a, requires_grad=True)
        self.b = b
        self.calls: list[tuple[str, torch.Tensor, torch.Tensor, torch.Tensor | None]] = []

    def __call__(self, view: str, x_t: torch.Tensor, sigma: torch.Tensor, samples: Any = None) -> torch.Tensor:
        self.calls.append((view, x_t.detach().clone(), sigma.detach().clone(), samples))
        return self.a * x_t if view == "current" else self.b * x_t


def make_inputs(loss: DPOLoss, policy: LinearPolicy, rewards: list[float], group_ids: list[int], idx: list[int]):
    """Inputs for the micro-batch ``idx`` of the batch, with extras prepared on the whole batch."""
    extras = loss.prepare(torch.tensor(rewards), torch.zeros(len(rewards)), torch.tensor(group_ids))
    x0 = torch.tensor([X0[i % len(X0)] for i in range(len(rewards))]).reshape(len(rewards), 1, 1, 2)
    pick = torch.tensor(idx)
    return ForwardLossInputs(
        x0=x0[pick],
        advantages=torch.zeros(len(idx)),
        rewards=torch.tensor(rewards)[pick],
        group_ids=torch.tensor(group_ids)[pick],
        generators=[torch.Generator().manual_seed(SEEDS[i % len(SEEDS)]) for i in idx],
        velocity=policy,
        extras={k: v[pick] for k, v in extras.items()},
    )


def hand_pair(seed: int, x0_w: list[float], x0_l: list[float], a: float = A, b: float = B_REF) -> dict[str, float]:
    """One pair's quantities, from the draw of the chosen sample's generator, in plain floats."""
    generator = torch.Generator().manual_seed(seed)
    z = torch.randn(1, generator=generator).item()  # first t's normal, then ε (the documented order)
    eps = torch.randn((1, 1, 2), generator=generator).flatten().tolist()
    t = 1.0 / (1.0 + math.exp(-(0.0 + 1.0 * z)))

    def errors(x0: list[float]) -> tuple[float, float, float]:
        x_t = [(1 - t) * x + t * e for x, e in zip(x0, eps, strict=True)]
        u = [e - x for x, e in zip(x0, eps, strict=True)]
        e_theta = sum((a * xt - ut) ** 2 for xt, ut in zip(x_t, u, strict=True)) / 2
        e_ref = sum((b * xt - ut) ** 2 for xt, ut in zip(x_t, u, strict=True)) / 2
        de_da = sum(2 * (a * xt - ut) * xt for xt, ut in zip(x_t, u, strict=True)) / 2
        return e_theta, e_ref, de_da

    etw, erw, dw = errors(x0_w)
    etl, erl, dl = errors(x0_l)
    inside = -(BETA / 2) * ((etw - etl) - (erw - erl))
    sigmoid_neg = 1.0 / (1.0 + math.exp(inside))  # σ(-inside)
    return {
        "t": t,
        "inside": inside,
        "loss": math.log1p(math.exp(-inside)),  # -log σ(inside)
        "reward_chosen": -(BETA / 2) * (etw - erw),
        "reward_rejected": -(BETA / 2) * (etl - erl),
        "policy_mse": (etw + etl) / 2,
        "reference_mse": (erw + erl) / 2,
        "chosen_error_delta": etw - erw,
        "rejected_error_delta": etl - erl,
        # d(-log σ(inside))/da = -σ(-inside) · d inside/da = σ(-inside) · (β/2) · (de_w/da - de_l/da)
        "grad_a": sigmoid_neg * (BETA / 2) * (dw - dl),
    }


@pytest.fixture
def loss() -> DPOLoss:
    return DPOLoss(DPOLossConfig(beta=BETA))


# rewards: group 0 = (1.0, 0.0) -> chosen 0, rejected 1; group 1 = (3.0, 0.0) -> chosen 2, rejected 3
REWARDS, GROUPS = [1.0, 0.0, 3.0, 0.0], [0, 0, 1, 1]


def test_loss_metrics_and_gradient_match_the_hand_computation(loss: DPOLoss) -> None:
    policy = LinearPolicy()
    out = loss(make_inputs(loss, policy, REWARDS, GROUPS, [0, 1, 2, 3]))
    pairs = [hand_pair(SEEDS[0], X0[0], X0[1]), hand_pair(SEEDS[2], X0[2], X0[3])]
    assert out.loss.item() == pytest.approx(sum(p["loss"] for p in pairs) / 2, rel=1e-5)
    out.loss.backward()
    assert policy.a.grad.item() == pytest.approx(sum(p["grad_a"] for p in pairs) / 2, rel=1e-4)
    expected = {
        "implicit_acc": sum(p["inside"] > 0 for p in pairs) / 2,
        "reward_margin": sum(p["inside"] for p in pairs) / 2,
        "reward_chosen": sum(p["reward_chosen"] for p in pairs) / 2,
        "reward_rejected": sum(p["reward_rejected"] for p in pairs) / 2,
        "policy_mse": sum(p["policy_mse"] for p in pairs) / 2,
        "reference_mse": sum(p["reference_mse"] for p in pairs) / 2,
        "chosen_error_delta": sum(p["chosen_error_delta"] for p in pairs) / 2,
        "rejected_error_delta": sum(p["rejected_error_delta"] for p in pairs) / 2,
        "velocity_norm_ratio": A / B_REF,  # ‖a·x‖ / ‖b·x‖ for the linear stand-in
        "pairs": 2.0,
        "groups_skipped": 0.0,
    }
    assert set(out.metrics) == set(expected)
    for key, value in expected.items():
        assert out.metrics[key] == pytest.approx(value, rel=1e-5, abs=1e-7), key
    # the hand computation is not degenerate: the two pairs disagree in sign
    assert {p["inside"] > 0 for p in pairs} == {True, False}


def test_pairs_share_t_and_noise_and_only_pair_members_are_forwarded(loss: DPOLoss) -> None:
    # group 0 has three samples: rewards 1, 0, 0.5 -> chosen 0, rejected 1, sample 2 unused
    policy = LinearPolicy()
    loss(make_inputs(loss, policy, [1.0, 0.0, 0.5], [0, 0, 0], [0, 1, 2]))
    views = [call[0] for call in policy.calls]
    assert views == ["current", "reference"]
    _, x_t, sigma, samples = policy.calls[0]
    assert samples.tolist() == [0, 1]  # chosen then rejected; the unused sample is not evaluated
    assert sigma[0] == sigma[1] == pytest.approx(hand_pair(SEEDS[0], X0[0], X0[1])["t"])
    t = sigma[0]
    x0 = torch.tensor([X0[0], X0[1]]).reshape(2, 1, 1, 2)
    noise = (x_t - (1 - t) * x0) / t
    torch.testing.assert_close(noise[0], noise[1])
    # the reference sees exactly the same inputs
    torch.testing.assert_close(policy.calls[1][1], x_t)
    assert policy.calls[1][3].tolist() == [0, 1]


def test_micro_batches_combine_to_the_whole_batch(loss: DPOLoss) -> None:
    """The update weights a micro-batch of B samples by B / N and averages metrics weighted by B: with the N / P
    weight the per-group calls must add up to the whole-batch loss and metrics, here with a skipped group."""
    rewards, groups = [1.0, 0.0, 2.0, 2.0, 0.0, 3.0], [0, 0, 1, 1, 2, 2]  # group 1 has no spread
    whole = loss(make_inputs(loss, LinearPolicy(), rewards, groups, list(range(6))))
    parts = [loss(make_inputs(loss, LinearPolicy(), rewards, groups, idx)) for idx in ([0, 1], [2, 3], [4, 5])]
    combined = sum(p.loss.item() * 2 / 6 for p in parts)
    assert combined == pytest.approx(whole.loss.item(), rel=1e-6)
    for key, value in whole.metrics.items():
        assert sum(p.metrics[key] * 2 for p in parts) / 6 == pytest.approx(value, rel=1e-6, abs=1e-7), key
    assert whole.metrics["pairs"] == 2.0 and whole.metrics["groups_skipped"] == 1.0


def test_a_micro_batch_without_pairs_gives_a_zero_loss_that_reaches_the_policy(loss: DPOLoss) -> None:
    policy = LinearPolicy()
    out = loss(make_inputs(loss, policy, [2.0, 2.0, 0.0, 1.0], [0, 0, 1, 1], [0, 1]))
    assert out.loss.item() == 0.0 and out.loss.requires_grad
    out.loss.backward()
    assert policy.a.grad is not None and policy.a.grad.item() == 0.0
    # the same views as a micro-batch with pairs: under FSDP2 every worker must run the same (collective) forwards
    assert [call[0] for call in policy.calls] == ["current", "reference"]
    assert out.metrics["implicit_acc"] == 0.0 and out.metrics["pairs"] == 1.0 and out.metrics["groups_skipped"] == 1.0


def test_dpo_terms_by_hand() -> None:
    # e_θ^w = 0.5, e_θ^l = 0.7, e_ref^w = 0.6, e_ref^l = 0.65, β = 10:
    # inside = -5 · ((0.5 - 0.7) - (0.6 - 0.65)) = -5 · (-0.15) = 0.75
    terms = dpo_terms(torch.tensor([0.5]), torch.tensor([0.7]), torch.tensor([0.6]), torch.tensor([0.65]), 10.0)
    assert terms.inside.item() == pytest.approx(0.75, rel=1e-6)
    assert terms.reward_chosen.item() == pytest.approx(-5 * (0.5 - 0.6), rel=1e-6)  # 0.5
    assert terms.reward_rejected.item() == pytest.approx(-5 * (0.7 - 0.65), rel=1e-5)  # -0.25
    assert terms.loss.item() == pytest.approx(math.log1p(math.exp(-0.75)), rel=1e-6)


def test_policy_equal_to_reference_gives_log_2(loss: DPOLoss) -> None:
    out = loss(make_inputs(loss, LinearPolicy(a=B_REF), REWARDS, GROUPS, [0, 1, 2, 3]))
    assert out.loss.item() == pytest.approx(math.log(2.0), rel=1e-6)
    assert out.metrics["implicit_acc"] == 0.0 and out.metrics["reward_margin"] == 0.0


def test_offline_pairing_ignores_rewards() -> None:
    loss = DPOLoss(DPOLossConfig(beta=BETA, pairing="offline"))
    policy = LinearPolicy()
    # rewards say sample 1 is better, but offline pairs are (first, second) = (chosen, rejected)
    out = loss(make_inputs(loss, policy, [0.0, 9.0], [0, 0], [0, 1]))
    assert out.loss.item() == pytest.approx(hand_pair(SEEDS[0], X0[0], X0[1])["loss"], rel=1e-5)


def test_missing_or_inconsistent_extras_are_reported(loss: DPOLoss) -> None:
    inputs = make_inputs(loss, LinearPolicy(), REWARDS, GROUPS, [0, 1, 2, 3])
    with pytest.raises(RuntimeFailure, match="no pairing"):
        loss(ForwardLossInputs(**{**_fields(inputs), "extras": {}}))
    split = make_inputs(loss, LinearPolicy(), REWARDS, GROUPS, [0, 3])  # chosen 0 without its rejected 1
    with pytest.raises(RuntimeFailure, match="no rejected"):
        loss(split)


def test_requirements() -> None:
    req = DPOLoss(DPOLossConfig(timesteps=3)).requirements
    assert req.inputs == "forward" and req.batch_unit == "group" and req.timesteps == 3
    assert req.views == frozenset({"current", "reference"})


def _fields(inputs: ForwardLossInputs) -> dict[str, Any]:
    import attrs

    return {f.name: getattr(inputs, f.name) for f in attrs.fields(ForwardLossInputs)}


# all_pairs: group 0 = rewards (0.2, 1.0, 0.6) -> pairs (1, 0), (1, 2), (2, 0), one draw from sample 0's generator;
# group 1 = (3.0, 3.0) has no pair and is skipped
ALL_REWARDS, ALL_GROUPS = [0.2, 1.0, 0.6, 3.0, 3.0], [0, 0, 0, 1, 1]


@pytest.fixture
def all_pairs_loss() -> DPOLoss:
    return DPOLoss(DPOLossConfig(beta=BETA, pairing="all_pairs"))


def test_all_pairs_match_the_hand_computation(all_pairs_loss: DPOLoss) -> None:
    policy = LinearPolicy()
    out = all_pairs_loss(make_inputs(all_pairs_loss, policy, ALL_REWARDS, ALL_GROUPS, [0, 1, 2, 3, 4]))
    pairs = [hand_pair(SEEDS[0], X0[w], X0[lose]) for w, lose in ((1, 0), (1, 2), (2, 0))]
    assert out.loss.item() == pytest.approx(sum(p["loss"] for p in pairs) / 3, rel=1e-5)
    out.loss.backward()
    assert policy.a.grad.item() == pytest.approx(sum(p["grad_a"] for p in pairs) / 3, rel=1e-4)
    assert out.metrics["implicit_acc"] == pytest.approx(sum(p["inside"] > 0 for p in pairs) / 3)
    assert out.metrics["reward_margin"] == pytest.approx(sum(p["inside"] for p in pairs) / 3, rel=1e-5)
    assert out.metrics["policy_mse"] == pytest.approx(sum(p["policy_mse"] for p in pairs) / 3, rel=1e-5)
    assert out.metrics["pairs"] == 3.0 and out.metrics["groups_skipped"] == 1.0
    # each of the group's samples is evaluated once, all at the group's one t; the skipped group not at all
    _, _, sigma, samples = policy.calls[0]
    assert samples.tolist() == [0, 1, 2]
    assert torch.allclose(sigma, torch.full((3,), pairs[0]["t"]))


def test_all_pairs_micro_batches_combine_to_the_whole_batch(all_pairs_loss: DPOLoss) -> None:
    rewards, groups = [0.2, 1.0, 0.6, 3.0, 0.0, 1.0], [0, 0, 0, 1, 1, 1]  # 3 pairs in each group
    whole = all_pairs_loss(make_inputs(all_pairs_loss, LinearPolicy(), rewards, groups, list(range(6))))
    parts = [
        all_pairs_loss(make_inputs(all_pairs_loss, LinearPolicy(), rewards, groups, idx))
        for idx in ([0, 1, 2], [3, 4, 5])
    ]
    assert sum(p.loss.item() * 3 / 6 for p in parts) == pytest.approx(whole.loss.item(), rel=1e-6)
    for key, value in whole.metrics.items():
        assert sum(p.metrics[key] * 3 for p in parts) / 6 == pytest.approx(value, rel=1e-6, abs=1e-7), key
    assert whole.metrics["pairs"] == 6.0


def test_all_pairs_refuse_a_split_group(all_pairs_loss: DPOLoss) -> None:
    split = make_inputs(all_pairs_loss, LinearPolicy(), ALL_REWARDS, ALL_GROUPS, [0, 1])  # sample 2 left out
    with pytest.raises(RuntimeFailure, match="do not form its pairs"):
        all_pairs_loss(split)
