"""cps against docs/math.md#cps-sampler, computed by hand with Python floats (float64) on tiny tensors."""

from __future__ import annotations

import math

import pytest
import torch
from omni_rl_flow_grpo.config import CPSConfig
from omni_rl_flow_grpo.samplers.cps import CPSSampler

X = [[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]]
V = [[0.1, -0.2, 0.3], [-0.4, 0.5, 0.6]]
Z = [[0.3, -1.2, 0.7], [-0.5, 0.9, 1.1]]


def _t(rows: list[list[float]]) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float32)


def _expected(eta: float, sigma: float, sigma_next: float, x: list[float], v: list[float], z: list[float]):
    s = sigma_next * math.sin(eta * math.pi / 2)
    x0 = [xi - sigma * vi for xi, vi in zip(x, v, strict=True)]
    x1 = [xi + (1 - sigma) * vi for xi, vi in zip(x, v, strict=True)]
    # sqrt(σ'² - s²) = σ'·cos(ηπ/2)
    mean = [(1 - sigma_next) * a + sigma_next * math.cos(eta * math.pi / 2) * b for a, b in zip(x0, x1, strict=True)]
    sample = [m + s * zi for m, zi in zip(mean, z, strict=True)]
    log_prob = -sum((s * zi) ** 2 for zi in z) / len(z)  # no 1/(2s²), no constants (reference)
    return s, mean, sample, log_prob


@pytest.mark.parametrize("eta", [0.8, 0.3, 1.0])
def test_step_matches_hand_computed_values(eta: float) -> None:
    sampler = CPSSampler(CPSConfig(noise_level=eta))
    sigma, sigma_next = [0.8, 0.6], [0.6, 0.3]
    out = sampler.step(_t(X), _t(V), torch.tensor(sigma), torch.tensor(sigma_next), noise=_t(Z))
    for b in range(2):
        s, mean, sample, log_prob = _expected(eta, sigma[b], sigma_next[b], X[b], V[b], Z[b])
        assert out.std_dev_t[b].item() == pytest.approx(s, rel=1e-6)
        assert out.mean[b].tolist() == pytest.approx(mean, rel=1e-6, abs=1e-6)
        assert out.sample[b].tolist() == pytest.approx(sample, rel=1e-6, abs=1e-6)
        assert out.log_prob[b].item() == pytest.approx(log_prob, rel=1e-5, abs=1e-7)


def test_sigma_one_needs_no_sigma_max() -> None:
    sampler = CPSSampler(CPSConfig())
    out = sampler.step(_t(X), _t(V), torch.tensor([1.0, 1.0]), torch.tensor([0.9, 0.9]), noise=_t(Z))
    for b in range(2):
        _, _, sample, log_prob = _expected(0.8, 1.0, 0.9, X[b], V[b], Z[b])
        assert out.sample[b].tolist() == pytest.approx(sample, rel=1e-6, abs=1e-6)
        assert out.log_prob[b].item() == pytest.approx(log_prob, rel=1e-5)


def test_last_step_is_deterministic() -> None:
    """σ' = 0: s = 0, x' = x̂₀ = x - σ·v and log p = 0."""
    sampler = CPSSampler(CPSConfig())
    out = sampler.step(_t(X), _t(V), torch.tensor([0.25, 0.25]), torch.tensor([0.0, 0.0]), noise=_t(Z))
    x0 = [[xi - 0.25 * vi for xi, vi in zip(xr, vr, strict=True)] for xr, vr in zip(X, V, strict=True)]
    assert out.sample.tolist() == [pytest.approx(r, abs=1e-7) for r in x0]
    assert out.log_prob.tolist() == [0.0, 0.0]
    assert out.std_dev_t.tolist() == [0.0, 0.0]


def test_eta_zero_is_the_euler_step() -> None:
    """(1 - σ')(x - σv) + σ'(x + (1 - σ)v) = x + (σ' - σ)v: equal up to float32 rounding."""
    sampler = CPSSampler(CPSConfig(noise_level=0.0))
    x, v = torch.randn(3, 4, 5, 5), torch.randn(3, 4, 5, 5)
    sigma, sigma_next = torch.tensor([1.0, 0.7, 0.2]), torch.tensor([0.9, 0.5, 0.0])
    out = sampler.step(x, v, sigma, sigma_next)
    torch.testing.assert_close(out.sample, x + v * (sigma_next - sigma).view(-1, 1, 1, 1))
    assert out.log_prob is None and not sampler.stochastic
    assert sampler.window(0, 10, 0) == range(0)


def test_rescoring_a_drawn_step_gives_ratio_one() -> None:
    """The on-policy ratio self-check (docs/math.md#on-policy-ratio) for cps."""
    torch.manual_seed(0)
    sampler = CPSSampler(CPSConfig(noise_level=0.8))
    sigmas = torch.tensor([1.0, 0.95, 0.8, 0.5, 0.2, 0.0])
    x = torch.randn(4, 16, 8, 8)
    for i in range(len(sigmas) - 1):
        v = torch.randn_like(x)
        sig, nxt = sigmas[i].expand(4), sigmas[i + 1].expand(4)
        drawn = sampler.step(x, v, sig, nxt, noise=torch.randn_like(x))
        again = sampler.step(x, v, sig, nxt, prev_sample=drawn.sample)
        ratio = torch.exp(again.log_prob - drawn.log_prob)
        assert (ratio - 1).abs().max().item() < 1e-6
        x = drawn.sample


def test_bf16_inputs_are_upcast_first() -> None:
    sampler = CPSSampler(CPSConfig())
    x, v, z = (t.to(torch.bfloat16) for t in (_t(X), _t(V), _t(Z)))
    sigma = torch.tensor([0.8, 0.6], dtype=torch.bfloat16)
    sigma_next = torch.tensor([0.6, 0.3], dtype=torch.bfloat16)
    out = sampler.step(x, v, sigma, sigma_next, noise=z)
    ref = sampler.step(x.float(), v.float(), sigma.float(), sigma_next.float(), noise=z.float())
    for name in ("sample", "mean", "std_dev_t", "log_prob"):
        assert getattr(out, name).dtype == torch.float32, name
        assert torch.equal(getattr(out, name), getattr(ref, name)), name


def test_prev_sample_is_detached() -> None:
    sampler = CPSSampler(CPSConfig())
    v = _t(V).requires_grad_(True)
    prev = _t(Z).requires_grad_(True)
    out = sampler.step(_t(X), v, torch.tensor([0.8, 0.6]), torch.tensor([0.6, 0.3]), prev_sample=prev)
    out.log_prob.sum().backward()
    assert prev.grad is None and v.grad is not None


@pytest.mark.parametrize("eta", [1.5, -0.1, math.nan])
def test_a_noise_level_outside_the_unit_interval_is_refused_with_its_meaning(eta: float) -> None:
    with pytest.raises(ValueError) as excinfo:
        CPSConfig(noise_level=eta)
    assert str(excinfo.value) == f"noise_level must be between 0 and 1, got {eta!r}; the noise angle is eta * pi / 2"
