"""grpo_guard against hand computation (Python floats, docs/math.md#grpo-guard-loss written out): the loss, its gradient
through log π_θ and through the bias b (μ_θ), the clip on both sides, the per-step reweighting, the KL term and
every metric."""

from __future__ import annotations

import math

import pytest
import torch
from omni_rl_grpo_guard.config import GRPOGuardLossConfig
from omni_rl_grpo_guard.loss import GRPOGuardLoss

from omni_rl.batch import SamplerStep, TrajectoryLossInputs

EPS = 1e-2
SCALE = [0.5, 0.8, 0.3]  # c_i, the std of x' of each sample
SIGMA = [0.9, 0.7, 0.5]
NEXT_SIGMA = [0.8, 0.55, 0.45]  # -dt = 0.1, 0.15, 0.05
MEAN = [[0.1, -0.2], [0.05, 0.0], [0.3, 0.1]]
OLD_MEAN = [[0.08, -0.18], [0.0, 0.02], [0.29, 0.12]]
OLD = [-0.3, -0.2, -0.1]
LOG_RATIO = [0.06, -0.05, 0.01]
ADV = [1.0, 2.0, -7.0]  # -7 is clipped to -5
STD = [0.4, 0.6, 0.2]  # std_dev_t (the KL's s, without sqrt(-dt))
REF_MEAN = [[0.0, -0.1], [0.1, 0.1], [0.2, 0.0]]
STEPS = [4, 2, 4]


def _inputs(reference: bool = False) -> tuple[TrajectoryLossInputs, torch.Tensor, torch.Tensor]:
    log_prob = torch.tensor([o + r for o, r in zip(OLD, LOG_RATIO, strict=True)], requires_grad=True)
    mean = torch.tensor(MEAN, requires_grad=True)

    def step(m: torch.Tensor, lp: torch.Tensor | None) -> SamplerStep:
        return SamplerStep(
            sample=torch.zeros(3, 2), mean=m, std_dev_t=torch.tensor(STD), log_prob=lp, scale=torch.tensor(SCALE)
        )

    inputs = TrajectoryLossInputs(
        current=step(mean, log_prob),
        old_log_prob=torch.tensor(OLD),
        advantages=torch.tensor(ADV),
        old=step(torch.tensor(OLD_MEAN), torch.tensor(OLD)),
        reference=step(torch.tensor(REF_MEAN), None) if reference else None,
        sigmas=torch.tensor(SIGMA),
        next_sigmas=torch.tensor(NEXT_SIGMA),
        step_indices=torch.tensor(STEPS),
    )
    return inputs, log_prob, mean


def _hand(reweight: bool = True) -> dict[str, list[float]]:
    """Per sample: b, ρ (normalised), the clipped term, its weight, and d(weighted term)/dρ (0 when clipped)."""
    out: dict[str, list[float]] = {k: [] for k in ("b", "rho", "term", "w", "dterm_drho")}
    for i in range(3):
        c = SCALE[i]
        b = sum((m - o) ** 2 for m, o in zip(MEAN[i], OLD_MEAN[i], strict=True)) / 2 / (2 * c * c)
        rho = math.exp((LOG_RATIO[i] + b) * c)
        a = max(-5.0, min(5.0, ADV[i]))
        unclipped, clipped = -a * rho, -a * max(1 - EPS, min(1 + EPS, rho))
        w = 1 / (SIGMA[i] - NEXT_SIGMA[i]) if reweight else 1.0
        out["b"].append(b)
        out["rho"].append(rho)
        out["term"].append(max(unclipped, clipped))
        out["w"].append(w)
        out["dterm_drho"].append(-a * w if unclipped >= clipped else 0.0)
    return out


@pytest.mark.parametrize("reweight", [True, False], ids=["reweighted", "ratio-norm-only"])
def test_loss_and_gradient_by_hand(reweight: bool) -> None:
    loss = GRPOGuardLoss(GRPOGuardLossConfig(clip_ratio=EPS, step_reweight=reweight))
    inputs, log_prob, mean = _inputs()
    out = loss(inputs)
    h = _hand(reweight)
    # sample 0: ρ above 1 + ε with A > 0 (the clip holds it); 1: below 1 - ε with A > 0 (unclipped); 2: inside
    assert h["rho"][0] > 1 + EPS and h["rho"][1] < 1 - EPS and abs(h["rho"][2] - 1) < EPS
    assert [d != 0 for d in h["dterm_drho"]] == [False, True, True]
    expected = sum(w * t for w, t in zip(h["w"], h["term"], strict=True)) / 3
    assert out.loss.item() == pytest.approx(expected, rel=1e-6)

    out.loss.backward()
    # dρ/d log π_θ = ρ·c; dρ/dμ_θ,d = ρ·c·db/dμ_θ,d, db/dμ_θ,d = 2(μ_θ,d − μ_old,d)/D / (2c²), D = 2
    grad_lp = [h["dterm_drho"][i] * h["rho"][i] * SCALE[i] / 3 for i in range(3)]
    grad_mean = [
        [grad_lp[i] * 2 * (MEAN[i][d] - OLD_MEAN[i][d]) / 2 / (2 * SCALE[i] ** 2) for d in range(2)] for i in range(3)
    ]
    assert log_prob.grad.tolist() == pytest.approx(grad_lp, rel=1e-5, abs=1e-9)
    assert mean.grad.flatten().tolist() == pytest.approx([g for row in grad_mean for g in row], rel=1e-5, abs=1e-9)


def test_metrics_by_hand() -> None:
    out = GRPOGuardLoss(GRPOGuardLossConfig(clip_ratio=EPS))(_inputs()[0])
    h = _hand()
    rho, raw = h["rho"], [math.exp(r) for r in LOG_RATIO]

    def mean(v: list[float]) -> float:
        return sum(v) / len(v)

    def std(v: list[float]) -> float:
        return math.sqrt(sum((x - mean(v)) ** 2 for x in v) / len(v))

    expected = {
        "policy_loss": sum(w * t for w, t in zip(h["w"], h["term"], strict=True)) / 3,
        "ratio_mean": mean(rho),
        "ratio_std": std(rho),
        "ratio_mean_raw": mean(raw),
        "ratio_std_raw": std(raw),
        "ratio_bias": mean(h["b"]),
        "clip_frac": 2 / 3,
        "clip_frac_high": 1 / 3,
        "clip_frac_low": 1 / 3,
        "ppo_kl": mean([-r for r in LOG_RATIO]),
        "approx_kl": 0.5 * mean([r * r for r in LOG_RATIO]),
        "advantage_abs_mean": mean([abs(a) for a in ADV]),
        "ratio_mean/step_4": (rho[0] + rho[2]) / 2,
        "ratio_mean/step_2": rho[1],
        "ratio_mean_raw/step_4": (raw[0] + raw[2]) / 2,
        "ratio_mean_raw/step_2": raw[1],
    }
    assert set(out.metrics) == set(expected)
    for key, value in expected.items():
        assert out.metrics[key] == pytest.approx(value, rel=1e-5, abs=1e-7), key
    assert out.metric_counts == {
        "ratio_mean/step_4": 2,
        "ratio_mean/step_2": 1,
        "ratio_mean_raw/step_4": 2,
        "ratio_mean_raw/step_2": 1,
    }


def test_kl_term_by_hand() -> None:
    """kl = mean_i mean_d (μ_θ − μ_ref)²/(2 s_i²) with s = std_dev_t, added with β; its gradient reaches μ_θ."""
    beta = 0.1
    loss = GRPOGuardLoss(GRPOGuardLossConfig(clip_ratio=EPS, kl_coef=beta))
    assert loss.requirements.views == frozenset({"current", "old", "reference"})
    inputs, _, mean = _inputs(reference=True)
    out = loss(inputs)
    kl = (
        sum(
            sum((m - r) ** 2 for m, r in zip(MEAN[i], REF_MEAN[i], strict=True)) / 2 / (2 * STD[i] ** 2)
            for i in range(3)
        )
        / 3
    )
    assert out.metrics["kl"] == pytest.approx(kl, rel=1e-6)
    assert out.loss.item() == pytest.approx(out.metrics["policy_loss"] + beta * kl, rel=1e-6)
    out.loss.backward()
    policy_only = GRPOGuardLoss(GRPOGuardLossConfig(clip_ratio=EPS))
    inputs2, _, mean2 = _inputs()
    policy_only(inputs2).loss.backward()
    kl_grad = [
        beta * (MEAN[i][d] - REF_MEAN[i][d]) / 2 / (STD[i] ** 2) / 3 for i in range(3) for d in range(2)
    ]  # d/dμ of mean_d (μ − μ_ref)²/(2s²) / B = (μ − μ_ref)/(D s²) / B
    assert (mean.grad - mean2.grad).flatten().tolist() == pytest.approx(kl_grad, rel=1e-5)


def test_missing_inputs_are_named() -> None:
    loss = GRPOGuardLoss(GRPOGuardLossConfig())
    inputs, _, _ = _inputs()
    inputs.current.scale = None
    with pytest.raises(ValueError, match=r"grpo_guard: the sampler does not report the std of x'"):
        loss(inputs)
    inputs, _, _ = _inputs()
    inputs.old = None
    with pytest.raises(ValueError, match=r"grpo_guard: no old view was given"):
        loss(inputs)
    inputs, _, _ = _inputs()
    inputs.sigmas = None
    with pytest.raises(ValueError, match=r"step_reweight needs each sample's sigma"):
        loss(inputs)
    inputs, _, _ = _inputs()
    inputs.current.log_prob = None
    with pytest.raises(ValueError, match=r"grpo_guard needs per-step log-probs"):
        loss(inputs)
