"""flow_dppo against hand computation (Python floats, docs/math.md#flow-dppo-loss written out): which steps the trust
region drops, the loss and its gradient (none through a dropped step, none through the mask), the unclipped
advantage, the KL term and every metric; on-policy it is Flow-GRPO's unclipped objective at ratio 1."""

from __future__ import annotations

import math

import pytest
import torch
from omni_rl_flow_dppo.config import FlowDPPOLossConfig
from omni_rl_flow_dppo.loss import FlowDPPOLoss
from omni_rl_flow_dppo.trust_region import trust_region

from omni_rl.batch import SamplerStep, TrajectoryLossInputs

THRESHOLD = 1e-3
SCALE = [0.5, 0.8, 0.3, 0.4]  # the std of x' of each sample
MEAN = [[0.1, -0.2], [0.05, 0.0], [0.3, 0.1], [0.0, 0.2]]
OLD_MEAN = [[0.07, -0.17], [0.0, 0.05], [0.3, 0.11], [0.03, 0.17]]
OLD = [-0.3, -0.2, -0.1, -0.4]
LOG_RATIO = [0.02, -0.03, 0.01, -0.02]
ADV = [7.0, 2.0, -2.0, -1.5]  # 7 stays 7: flow_dppo does not clip advantages
STD = [0.4, 0.6, 0.2, 0.5]
REF_MEAN = [[0.0, -0.1], [0.1, 0.1], [0.2, 0.0], [0.1, 0.1]]
STEPS = [0, 1, 1, 0]


def _kl(i: int) -> float:
    return sum((m - o) ** 2 for m, o in zip(MEAN[i], OLD_MEAN[i], strict=True)) / 2 / (2 * SCALE[i] ** 2)


def _inputs(log_ratio: list[float] = LOG_RATIO, reference: bool = False, on_policy: bool = False):
    log_prob = torch.tensor([o + r for o, r in zip(OLD, log_ratio, strict=True)], requires_grad=True)
    mean = torch.tensor(MEAN, requires_grad=True)

    def step(m: torch.Tensor, lp: torch.Tensor | None) -> SamplerStep:
        return SamplerStep(
            sample=torch.zeros(4, 2), mean=m, std_dev_t=torch.tensor(STD), log_prob=lp, scale=torch.tensor(SCALE)
        )

    inputs = TrajectoryLossInputs(
        current=step(mean, log_prob),
        old_log_prob=torch.tensor(OLD),
        advantages=torch.tensor(ADV),
        old=step(mean.detach().clone() if on_policy else torch.tensor(OLD_MEAN), torch.tensor(OLD)),
        reference=step(torch.tensor(REF_MEAN), None) if reference else None,
        sigmas=torch.full((4,), 0.8),
        next_sigmas=torch.full((4,), 0.6),
        step_indices=torch.tensor(STEPS),
    )
    return inputs, log_prob, mean


def test_the_mask_loss_and_gradient_by_hand() -> None:
    # sample 0: outside the region (KL ≥ threshold), ρ > 1 with A > 0: moving away -> dropped
    # sample 1: outside, ρ < 1 with A > 0: moving back -> kept;  sample 2: inside (KL < threshold) -> kept
    # sample 3: outside, ρ < 1 with A < 0: moving away -> dropped
    kl = [_kl(i) for i in range(4)]
    assert [k >= THRESHOLD for k in kl] == [True, True, False, True]
    kept = [False, True, True, False]
    inputs, log_prob, mean = _inputs()
    out = FlowDPPOLoss(FlowDPPOLossConfig(kl_mask_threshold=THRESHOLD))(inputs)
    rho = [math.exp(r) for r in LOG_RATIO]
    expected = sum(-ADV[i] * rho[i] for i in range(4) if kept[i]) / 4
    assert out.loss.item() == pytest.approx(expected, rel=1e-6)
    out.loss.backward()
    assert log_prob.grad.tolist() == pytest.approx([-ADV[i] * rho[i] / 4 if kept[i] else 0.0 for i in range(4)])
    assert mean.grad is None or mean.grad.abs().sum() == 0  # the mask and the KL_new,old carry no gradient

    def avg(v: list[float]) -> float:
        return sum(v) / len(v)

    expected_metrics = {
        "policy_loss": expected,
        "dppo_masked_fraction": 2 / 4,
        "kl_new_old": avg(kl),
        "ratio_mean": avg(rho),
        "ratio_std": math.sqrt(avg([(r - avg(rho)) ** 2 for r in rho])),
        "ppo_kl": avg([-r for r in LOG_RATIO]),
        "ratio_mean/step_0": (rho[0] + rho[3]) / 2,
        "ratio_mean/step_1": (rho[1] + rho[2]) / 2,
    }
    assert set(out.metrics) == set(expected_metrics)
    for key, value in expected_metrics.items():
        assert out.metrics[key] == pytest.approx(value, rel=1e-5, abs=1e-8), key
    assert out.metric_counts == {"ratio_mean/step_0": 2, "ratio_mean/step_1": 2}


def test_a_dropped_step_with_an_overflowing_ratio_is_not_nan() -> None:
    """exp(200) overflows float32 to inf; the dropped term is selected away, not multiplied by 0."""
    inputs, log_prob, _ = _inputs(log_ratio=[200.0, -0.03, 0.01, -0.02])
    out = FlowDPPOLoss(FlowDPPOLossConfig(kl_mask_threshold=THRESHOLD))(inputs)
    assert torch.isfinite(out.loss)
    out.loss.backward()
    assert torch.isfinite(log_prob.grad).all() and log_prob.grad[0] == 0


def test_kl_at_the_threshold_is_outside_the_region() -> None:
    """docs/math.md#flow-dppo-loss: drop when KL ≥ threshold (an exactly representable KL of 0.125 against a
    threshold of 0.125)."""
    region = trust_region(
        torch.tensor([[0.5, 0.5], [0.5, 0.5]]),
        torch.zeros(2, 2),
        torch.ones(2),
        torch.tensor([1.5, 1.5]),
        torch.tensor([1.0, -1.0]),
        0.125,
    )
    assert region.kl.tolist() == [0.125, 0.125]
    assert region.dropped.tolist() == [True, False]  # the second moves back towards the old policy: kept


def test_kl_term_by_hand() -> None:
    beta = 0.1
    loss = FlowDPPOLoss(FlowDPPOLossConfig(kl_mask_threshold=THRESHOLD, kl_coef=beta))
    assert loss.requirements.views == frozenset({"current", "old", "reference"})
    inputs, _, mean = _inputs(reference=True)
    out = loss(inputs)
    kl = sum(
        sum((m - r) ** 2 for m, r in zip(MEAN[i], REF_MEAN[i], strict=True)) / 2 / (2 * STD[i] ** 2) for i in range(4)
    )
    assert out.metrics["kl"] == pytest.approx(kl / 4, rel=1e-6)
    assert out.loss.item() == pytest.approx(out.metrics["policy_loss"] + beta * kl / 4, rel=1e-6)
    out.loss.backward()
    expected = [beta * (MEAN[i][d] - REF_MEAN[i][d]) / 2 / STD[i] ** 2 / 4 for i in range(4) for d in range(2)]
    assert mean.grad.flatten().tolist() == pytest.approx(expected, rel=1e-5)


def test_on_policy_ratio_one_nothing_dropped() -> None:
    """μ_θ = μ_old and log π_θ = log π_old: KL = 0, ρ = 1 exactly, nothing dropped, the loss is −mean(A)."""
    inputs, log_prob, _ = _inputs(log_ratio=[0.0] * 4, on_policy=True)
    out = FlowDPPOLoss(FlowDPPOLossConfig())(inputs)
    assert out.metrics["ratio_mean"] == 1.0 and out.metrics["ratio_std"] == 0.0
    assert out.metrics["kl_new_old"] == 0.0 and out.metrics["dppo_masked_fraction"] == 0.0
    assert out.loss.item() == pytest.approx(-sum(ADV) / 4)
    out.loss.backward()
    assert log_prob.grad.tolist() == pytest.approx([-a / 4 for a in ADV])


def test_missing_inputs_are_named() -> None:
    loss = FlowDPPOLoss(FlowDPPOLossConfig())
    inputs, _, _ = _inputs()
    inputs.current.scale = None
    with pytest.raises(ValueError, match=r"flow_dppo: the sampler does not report the std of x'"):
        loss(inputs)
    inputs, _, _ = _inputs()
    inputs.old = None
    with pytest.raises(ValueError, match=r"flow_dppo: no old view was given"):
        loss(inputs)
