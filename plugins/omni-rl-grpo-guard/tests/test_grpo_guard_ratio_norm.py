"""RatioNorm on real flow_sde steps: the per-sample c (the sampler's std of x') is the batch formula of
docs/math.md#grpo-guard-loss, c = mean_b(sqrt(-dt))·mean_b(s), when a call's samples share a step, the bias b
removes exactly the left shift of flow_sde's log-ratio, and on-policy (μ_θ = μ_old) the normalised ratio is exactly
1."""

from __future__ import annotations

import pytest
import torch
from omni_rl_flow_grpo.config import FlowSDEConfig
from omni_rl_flow_grpo.samplers.flow_sde import FlowSDESampler
from omni_rl_grpo_guard.config import GRPOGuardLossConfig
from omni_rl_grpo_guard.loss import GRPOGuardLoss
from omni_rl_grpo_guard.ratio_norm import ratio_norm

from omni_rl.batch import SamplerStep, TrajectoryLossInputs

B, SHAPE = 4, (4, 6, 6)
SAMPLER = FlowSDESampler(FlowSDEConfig(noise_level=0.7))
SIGMA_MAX = torch.full((B,), 0.95)


def _steps(
    sigma: float, sigma_next: float, drift: float
) -> tuple[SamplerStep, SamplerStep, torch.Tensor, torch.Tensor]:
    """(current, old, v_θ leaf, ε): the old policy draws x' = μ_old + scale·ε; the current one (velocity v_θ =
    v_old + drift·u) re-scores that x'."""
    g = torch.Generator().manual_seed(7)
    x = torch.randn(B, *SHAPE, generator=g)
    v_old = torch.randn(B, *SHAPE, generator=g)
    eps = torch.randn(B, *SHAPE, generator=g)
    v = (v_old + drift * torch.randn(B, *SHAPE, generator=g)).requires_grad_(True)
    s, s_next = torch.full((B,), sigma), torch.full((B,), sigma_next)
    old = SAMPLER.step(x, v_old, s, s_next, sigma_max=SIGMA_MAX, noise=eps)
    current = SAMPLER.step(x, v, s, s_next, sigma_max=SIGMA_MAX, prev_sample=old.sample)
    return current, old, v, eps


def _inputs(current: SamplerStep, old: SamplerStep, sigma: float, sigma_next: float) -> TrajectoryLossInputs:
    return TrajectoryLossInputs(
        current=current,
        old_log_prob=old.log_prob,
        advantages=torch.tensor([1.0, -0.5, 2.0, -1.5]),
        old=old,
        sigmas=torch.full((B,), sigma),
        next_sigmas=torch.full((B,), sigma_next),
    )


def _math_loss(current: SamplerStep, old: SamplerStep, inputs: TrajectoryLossInputs, eps: float) -> torch.Tensor:
    """docs/math.md#grpo-guard-loss with the batch scalars of its first notes, written out."""
    sqrt_dt = torch.sqrt(inputs.sigmas - inputs.next_sigmas)
    c = sqrt_dt.mean() * current.std_dev_t.mean()
    b = ((current.mean - old.mean) ** 2).reshape(B, -1).mean(dim=1) / (2 * c**2)
    rho = torch.exp((current.log_prob - old.log_prob + b) * c)
    a = inputs.advantages.clamp(-5, 5)
    terms = torch.maximum(-a * rho, -a * rho.clamp(1 - eps, 1 + eps))
    return terms.mean() / sqrt_dt.mean() ** 2


@pytest.mark.parametrize(("sigma", "sigma_next"), [(1.0, 0.95), (0.6, 0.45)], ids=["first-step", "mid-step"])
def test_per_sample_scale_is_maths_batch_formula_on_flow_sde(sigma: float, sigma_next: float) -> None:
    current, old, v, _ = _steps(sigma, sigma_next, drift=1e-3)
    inputs = _inputs(current, old, sigma, sigma_next)
    out = GRPOGuardLoss(GRPOGuardLossConfig(clip_ratio=1e-4))(inputs)
    (grad,) = torch.autograd.grad(out.loss, v, retain_graph=True)
    expected = _math_loss(current, old, inputs, 1e-4)
    (expected_grad,) = torch.autograd.grad(expected, v)
    assert out.loss.item() == pytest.approx(expected.item(), rel=1e-5)
    assert grad.abs().sum() > 0
    torch.testing.assert_close(grad, expected_grad, rtol=1e-4, atol=1e-9)


@pytest.mark.parametrize(("sigma", "sigma_next"), [(1.0, 0.95), (0.6, 0.45)], ids=["first-step", "mid-step"])
def test_bias_removes_exactly_the_left_shift(sigma: float, sigma_next: float) -> None:
    """(log π_θ − log π_old + b)·c = mean(ε·(μ_θ − μ_old)): zero-mean in ε, on one scale across steps."""
    current, old, _, eps = _steps(sigma, sigma_next, drift=0.1)
    norm = ratio_norm(current.log_prob, old.log_prob, current.mean, old.mean, current.scale)
    expected = (eps * (current.mean - old.mean)).reshape(B, -1).mean(dim=1)
    tolerance = 3e-7  # float32 rounding of log-probs of size ~1
    assert (norm.bias * norm.scale > 30 * tolerance).all()  # without b the check below would fail
    torch.testing.assert_close(torch.log(norm.ratio), expected, rtol=0, atol=tolerance)
    torch.testing.assert_close(norm.log_ratio, expected / norm.scale - norm.bias, rtol=0, atol=tolerance)


def test_on_policy_the_normalised_ratio_is_exactly_one() -> None:
    """μ_θ = μ_old: b = 0 and log π_θ = log π_old, so ρ = exp(0·c) = 1 exactly; the gradient is then
    mean_i w_i·(−Â_i)·c_i·∇log π_θ,i (the clip is inactive at ρ = 1)."""
    current, old, v, _ = _steps(0.6, 0.45, drift=0.0)
    inputs = _inputs(current, old, 0.6, 0.45)
    out = GRPOGuardLoss(GRPOGuardLossConfig())(inputs)
    assert out.metrics["ratio_mean"] == 1.0 and out.metrics["ratio_std"] == 0.0
    assert out.metrics["ratio_mean_raw"] == 1.0 and out.metrics["ratio_bias"] == 0.0
    assert out.metrics["clip_frac"] == 0.0
    (grad,) = torch.autograd.grad(out.loss, v, retain_graph=True)
    weights = (-inputs.advantages * current.scale / 0.15 / B).detach()
    (expected,) = torch.autograd.grad((weights * current.log_prob).sum(), v)
    torch.testing.assert_close(grad, expected, rtol=1e-5, atol=1e-9)
