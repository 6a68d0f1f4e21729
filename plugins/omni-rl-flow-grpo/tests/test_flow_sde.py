"""flow_sde against docs/math.md#flow-sde-sampler, computed by hand with Python floats (float64) on tiny tensors."""

from __future__ import annotations

import math

import pytest
import torch
from omni_rl_flow_grpo.config import FlowSDEConfig
from omni_rl_flow_grpo.samplers.flow_sde import FlowSDESampler

X = [[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]]
V = [[0.1, -0.2, 0.3], [-0.4, 0.5, 0.6]]
Z = [[0.3, -1.2, 0.7], [-0.5, 0.9, 1.1]]


def _t(rows: list[list[float]]) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float32)


def _expected(
    a: float, sigma: float, sigma_next: float, x: list[float], v: list[float], z: list[float], sigma_max=None
):
    """One sample's step, docs/math.md#flow-sde-sampler line by line."""
    sigma_tilde = sigma_max if sigma == 1 else sigma
    s = a * math.sqrt(sigma / (1 - sigma_tilde))
    dt = sigma_next - sigma
    mean = [
        xi * (1 + s**2 * dt / (2 * sigma)) + vi * (1 + s**2 * (1 - sigma) / (2 * sigma)) * dt
        for xi, vi in zip(x, v, strict=True)
    ]
    std = s * math.sqrt(-dt)
    sample = [m + std * zi for m, zi in zip(mean, z, strict=True)]
    # (x' - mu) = std * z, so the Gaussian log-density reduces to this; the mean is over the 3 elements
    log_prob = sum(-(zi**2) / 2 - math.log(std) - 0.5 * math.log(2 * math.pi) for zi in z) / len(z)
    return s, mean, sample, log_prob


def test_step_matches_hand_computed_values() -> None:
    sampler = FlowSDESampler(FlowSDEConfig(noise_level=0.7))
    sigma, sigma_next = [0.8, 0.6], [0.6, 0.3]
    out = sampler.step(_t(X), _t(V), torch.tensor(sigma), torch.tensor(sigma_next), noise=_t(Z))
    for b in range(2):
        s, mean, sample, log_prob = _expected(0.7, sigma[b], sigma_next[b], X[b], V[b], Z[b])
        assert out.std_dev_t[b].item() == pytest.approx(s, rel=1e-6)
        assert out.mean[b].tolist() == pytest.approx(mean, rel=1e-6, abs=1e-6)
        assert out.sample[b].tolist() == pytest.approx(sample, rel=1e-6, abs=1e-6)
        assert out.log_prob[b].item() == pytest.approx(log_prob, rel=1e-5, abs=1e-5)
    assert out.std_dev_t.shape == (2,) and out.log_prob.shape == (2,)


def test_sigma_one_uses_sigma_max() -> None:
    """At σ = 1, σ̃ = σ_max: s = a·sqrt(1 / (1 - σ_max)); a batch may mix σ = 1 and σ < 1."""
    sampler = FlowSDESampler(FlowSDEConfig(noise_level=0.7))
    sigma, sigma_next, sigma_max = [1.0, 0.5], [0.9, 0.25], [0.9, 0.9]
    out = sampler.step(
        _t(X),
        _t(V),
        torch.tensor(sigma),
        torch.tensor(sigma_next),
        sigma_max=torch.tensor(sigma_max),
        noise=_t(Z),
    )
    s0 = 0.7 * math.sqrt(1 / (1 - 0.9))
    assert out.std_dev_t[0].item() == pytest.approx(s0, rel=1e-6)
    for b in range(2):
        s, mean, sample, log_prob = _expected(0.7, sigma[b], sigma_next[b], X[b], V[b], Z[b], sigma_max[b])
        assert out.std_dev_t[b].item() == pytest.approx(s, rel=1e-6)
        assert out.mean[b].tolist() == pytest.approx(mean, rel=1e-6, abs=1e-6)
        assert out.sample[b].tolist() == pytest.approx(sample, rel=1e-6, abs=1e-6)
        assert out.log_prob[b].item() == pytest.approx(log_prob, rel=1e-5, abs=1e-5)


def test_sigma_one_without_sigma_max_is_a_clear_error() -> None:
    sampler = FlowSDESampler(FlowSDEConfig())
    with pytest.raises(ValueError, match="sigma_max"):
        sampler.step(_t(X), _t(V), torch.tensor([1.0, 0.5]), torch.tensor([0.9, 0.25]), noise=_t(Z))


def test_last_step_to_sigma_zero_is_finite() -> None:
    """σ' = 0 with σ < 1: s·sqrt(-dt) = a·σ/sqrt(1 - σ) > 0, a sharp but proper Gaussian."""
    sampler = FlowSDESampler(FlowSDEConfig(noise_level=0.7))
    out = sampler.step(_t(X), _t(V), torch.tensor([0.25, 0.25]), torch.tensor([0.0, 0.0]), noise=_t(Z))
    for b in range(2):
        _, _, sample, log_prob = _expected(0.7, 0.25, 0.0, X[b], V[b], Z[b])
        assert out.sample[b].tolist() == pytest.approx(sample, rel=1e-6, abs=1e-6)
        assert out.log_prob[b].item() == pytest.approx(log_prob, rel=1e-5, abs=1e-5)


def test_noise_level_zero_is_exactly_the_euler_step() -> None:
    sampler = FlowSDESampler(FlowSDEConfig(noise_level=0.0))
    x, v = torch.randn(3, 4, 5, 5), torch.randn(3, 4, 5, 5)
    sigma, sigma_next = torch.tensor([1.0, 0.7, 0.2]), torch.tensor([0.9, 0.5, 0.0])
    out = sampler.step(x, v, sigma, sigma_next)  # no sigma_max needed: s = 0
    euler = x + v * (sigma_next - sigma).view(-1, 1, 1, 1)
    assert torch.equal(out.mean, euler)
    assert torch.equal(out.sample, euler)
    assert out.log_prob is None
    assert not sampler.stochastic
    assert sampler.window(3, 10, 0) == range(0)
    assert torch.equal(out.std_dev_t, torch.zeros(3))


def test_rescoring_a_drawn_step_gives_ratio_one() -> None:
    """docs/math.md#on-policy-ratio: re-scoring the stored step reproduces its log-prob to float32 precision."""
    torch.manual_seed(0)
    sampler = FlowSDESampler(FlowSDEConfig(noise_level=0.7))
    sigmas = torch.tensor([1.0, 0.95, 0.8, 0.5, 0.2, 0.0])
    x = torch.randn(4, 16, 8, 8)
    for i in range(len(sigmas) - 1):
        v = torch.randn_like(x)
        sig, nxt = sigmas[i].expand(4), sigmas[i + 1].expand(4)
        kwargs = {"sigma_max": sigmas[1].expand(4)}
        drawn = sampler.step(x, v, sig, nxt, noise=torch.randn_like(x), **kwargs)
        again = sampler.step(x, v, sig, nxt, prev_sample=drawn.sample, **kwargs)
        ratio = torch.exp(again.log_prob - drawn.log_prob)
        assert again.log_prob.dtype == torch.float32
        assert (ratio - 1).abs().max().item() < 1e-6
        x = drawn.sample


def test_prev_sample_is_detached_and_gradients_reach_the_velocity() -> None:
    sampler = FlowSDESampler(FlowSDEConfig())
    v = _t(V).requires_grad_(True)
    prev = _t(Z).requires_grad_(True)
    out = sampler.step(_t(X), v, torch.tensor([0.8, 0.6]), torch.tensor([0.6, 0.3]), prev_sample=prev)
    assert torch.equal(out.sample, prev.detach()) and not out.sample.requires_grad
    out.log_prob.sum().backward()
    assert prev.grad is None
    assert v.grad is not None and v.grad.abs().sum() > 0


def test_without_noise_draws_from_the_global_generator() -> None:
    sampler = FlowSDESampler(FlowSDEConfig())
    sigma, sigma_next = torch.tensor([0.8, 0.6]), torch.tensor([0.6, 0.3])
    torch.manual_seed(123)
    drawn = sampler.step(_t(X), _t(V), sigma, sigma_next)
    torch.manual_seed(123)
    z = torch.randn(2, 3)
    given = sampler.step(_t(X), _t(V), sigma, sigma_next, noise=z)
    assert torch.equal(drawn.sample, given.sample)


def test_bf16_inputs_are_upcast_first() -> None:
    sampler = FlowSDESampler(FlowSDEConfig())
    x, v, z = (t.to(torch.bfloat16) for t in (_t(X), _t(V), _t(Z)))
    sigma = torch.tensor([0.8, 0.6], dtype=torch.bfloat16)
    sigma_next = torch.tensor([0.6, 0.3], dtype=torch.bfloat16)
    out = sampler.step(x, v, sigma, sigma_next, noise=z)
    ref = sampler.step(x.float(), v.float(), sigma.float(), sigma_next.float(), noise=z.float())
    for name in ("sample", "mean", "std_dev_t", "log_prob"):
        got = getattr(out, name)
        assert got.dtype == torch.float32, name
        assert torch.equal(got, getattr(ref, name)), name


def test_scalar_sigmas_broadcast_over_the_batch() -> None:
    sampler = FlowSDESampler(FlowSDEConfig())
    out = sampler.step(_t(X), _t(V), torch.tensor(0.8), torch.tensor(0.6), noise=_t(Z))
    ref = sampler.step(_t(X), _t(V), torch.tensor([0.8, 0.8]), torch.tensor([0.6, 0.6]), noise=_t(Z))
    assert torch.equal(out.log_prob, ref.log_prob) and out.std_dev_t.shape == (2,)
