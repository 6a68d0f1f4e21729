"""dance_sde against docs/math.md#dancegrpo-sde-sampler computed by hand with Python floats on tiny tensors, η = 0
against the Euler step, and the on-policy ratio of re-scored steps."""

from __future__ import annotations

import math

import pytest
import torch
from omni_rl_dance_grpo.config import DanceSDEConfig
from omni_rl_dance_grpo.sampler import DanceSDESampler
from omni_rl_flow_grpo.config import FlowSDEConfig
from omni_rl_flow_grpo.samplers.flow_sde import FlowSDESampler

X = [[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]]
V = [[0.1, -0.2, 0.3], [-0.4, 0.5, 0.6]]
Z = [[0.3, -1.2, 0.7], [-0.5, 0.9, 1.1]]


def _t(rows: list[list[float]]) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float32)


def _expected(eta: float, sigma: float, sigma_next: float, x: list[float], v: list[float], z: list[float]):
    """One sample's step, docs/math.md#dancegrpo-sde-sampler line by line, in float64."""
    dt = sigma_next - sigma
    mean = []
    for xi, vi in zip(x, v, strict=True):
        x0 = xi - sigma * vi
        score = -(xi - (1 - sigma) * x0) / sigma**2
        mean.append(xi + dt * vi - 0.5 * eta**2 * score * dt)
    s = eta * math.sqrt(sigma - sigma_next)
    sample = [m + s * zi for m, zi in zip(mean, z, strict=True)]
    # the full Gaussian log-density of x' = μ + s·z, constants included, mean over the 3 elements
    log_prob = sum(-((s * zi) ** 2) / (2 * s**2) - math.log(s) - 0.5 * math.log(2 * math.pi) for zi in z) / 3
    return s, mean, sample, log_prob


def test_defaults() -> None:
    config = DanceSDEConfig()
    assert config.noise_level == 0.3  # DanceGRPO's scripts: --eta 0.3
    assert (config.window_size, config.timestep_fraction, config.ode_solver) == (0, 1.0, "euler")


@pytest.mark.parametrize("eta", [0.3, 1.7])
def test_step_matches_hand_computed_values(eta: float) -> None:
    sampler = DanceSDESampler(DanceSDEConfig(noise_level=eta))
    sigma, sigma_next = [0.8, 1.0], [0.6, 0.9]  # σ = 1 needs no sigma_max: the score is then -x
    out = sampler.step(_t(X), _t(V), torch.tensor(sigma), torch.tensor(sigma_next), noise=_t(Z))
    assert out.std_dev_t.shape == (2,) and out.log_prob.shape == (2,) and out.scale.shape == (2,)
    for b in range(2):
        s, mean, sample, log_prob = _expected(eta, sigma[b], sigma_next[b], X[b], V[b], Z[b])
        assert out.std_dev_t[b].item() == pytest.approx(s, rel=1e-6)
        assert out.scale[b].item() == pytest.approx(s, rel=1e-6)  # the actual std of x'
        assert out.mean[b].tolist() == pytest.approx(mean, rel=1e-6, abs=1e-6)
        assert out.sample[b].tolist() == pytest.approx(sample, rel=1e-6, abs=1e-6)
        assert out.log_prob[b].item() == pytest.approx(log_prob, rel=1e-5, abs=1e-5)


def test_log_prob_keeps_the_gaussian_constants() -> None:
    """Where x' = μ the density is exactly -log s - log sqrt(2π) (the reference's accidental version gives 0)."""
    sampler = DanceSDESampler(DanceSDEConfig(noise_level=0.5))
    sigma, sigma_next = torch.tensor([0.7, 0.7]), torch.tensor([0.3, 0.3])
    out = sampler.step(_t(X), _t(V), sigma, sigma_next, noise=torch.zeros(2, 3))
    s = 0.5 * math.sqrt(0.4)
    expected = -math.log(s) - 0.5 * math.log(2 * math.pi)
    assert out.log_prob.tolist() == pytest.approx([expected, expected], rel=1e-6)


def test_last_step_to_sigma_zero_is_finite() -> None:
    """σ' = 0: s = η·sqrt(σ) > 0, a proper Gaussian (the KL term can divide by it)."""
    sampler = DanceSDESampler(DanceSDEConfig(noise_level=0.3))
    out = sampler.step(_t(X), _t(V), torch.tensor([0.25, 0.25]), torch.tensor([0.0, 0.0]), noise=_t(Z))
    assert out.std_dev_t.tolist() == pytest.approx([0.15, 0.15], rel=1e-6)
    assert torch.isfinite(out.log_prob).all() and torch.isfinite(out.sample).all()


def test_eta_zero_is_exactly_the_euler_step() -> None:
    sampler = DanceSDESampler(DanceSDEConfig(noise_level=0.0))
    assert not sampler.stochastic and sampler.window(1, 10, 0) == range(0)
    x, v = torch.randn(3, 4, 8, 8), torch.randn(3, 4, 8, 8)
    sigma, sigma_next = torch.tensor([1.0, 0.8, 0.3]), torch.tensor([0.9, 0.6, 0.0])
    out = sampler.step(x, v, sigma, sigma_next, noise=torch.randn(3, 4, 8, 8))
    euler = x + v * (sigma_next - sigma).view(-1, 1, 1, 1)  # the diffusers backend's deterministic step
    assert torch.equal(out.sample, euler) and torch.equal(out.mean, euler)
    assert out.log_prob is None and out.scale is None and out.std_dev_t.tolist() == [0.0, 0.0, 0.0]


def test_it_is_flow_sde_with_a_constant_diffusion_coefficient() -> None:
    """μ = x + v·dt + η²/(2σ)·(x + (1 - σ)v)·dt: flow_sde's step at a = η·sqrt((1 - σ)/σ), mean and std alike."""
    eta, sigma, sigma_next = 0.9, 0.6, 0.45
    a = eta * math.sqrt((1 - sigma) / sigma)
    dance = DanceSDESampler(DanceSDEConfig(noise_level=eta))
    flow = FlowSDESampler(FlowSDEConfig(noise_level=a))
    x, v, z = torch.randn(2, 3, 4, 4), torch.randn(2, 3, 4, 4), torch.randn(2, 3, 4, 4)
    s, s_next = torch.full((2,), sigma), torch.full((2,), sigma_next)
    ours, theirs = dance.step(x, v, s, s_next, noise=z), flow.step(x, v, s, s_next, noise=z)
    torch.testing.assert_close(ours.mean, theirs.mean, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(ours.scale, theirs.scale, rtol=1e-6, atol=0)
    torch.testing.assert_close(ours.log_prob, theirs.log_prob, rtol=1e-5, atol=1e-5)  # both exact densities


def test_rescoring_gives_ratio_one_and_a_gradient() -> None:
    """The on-policy self-check: re-scoring the drawn x' with the same velocity gives ratio 1 to 1e-6."""
    sampler = DanceSDESampler(DanceSDEConfig(noise_level=0.3))
    generator = torch.Generator().manual_seed(0)
    x, v = torch.randn(4, 16, 8, 8, generator=generator), torch.randn(4, 16, 8, 8, generator=generator)
    sigma, sigma_next = torch.tensor([1.0, 0.9, 0.5, 0.1]), torch.tensor([0.9, 0.7, 0.4, 0.0])
    drawn = sampler.step(x, v, sigma, sigma_next, noise=torch.randn(4, 16, 8, 8, generator=generator))
    velocity = v.clone().requires_grad_(True)
    rescored = sampler.step(x, velocity, sigma, sigma_next, prev_sample=drawn.sample)
    ratio = torch.exp(rescored.log_prob - drawn.log_prob)
    assert torch.max(torch.abs(ratio - 1)).item() < 1e-6
    rescored.log_prob.sum().backward()
    assert velocity.grad is not None and velocity.grad.abs().sum() > 0


def test_bf16_inputs_are_upcast() -> None:
    sampler = DanceSDESampler(DanceSDEConfig())
    x, v = _t(X).bfloat16(), _t(V).bfloat16()
    out = sampler.step(x, v, torch.tensor([0.8, 0.8]), torch.tensor([0.6, 0.6]), noise=_t(Z))
    assert out.sample.dtype == out.mean.dtype == out.log_prob.dtype == torch.float32


@pytest.mark.parametrize(
    ("sigma", "sigma_next"), [([0.5, 0.5], [0.5, 0.4]), ([0.5, 0.5], [0.6, 0.4]), ([0.0, 0.5], [0.0, 0.4])]
)
def test_a_step_that_does_not_go_down_is_a_clear_error(sigma: list[float], sigma_next: list[float]) -> None:
    sampler = DanceSDESampler(DanceSDEConfig())
    with pytest.raises(ValueError, match="dance_sde: every step must go down in sigma"):
        sampler.step(_t(X), _t(V), torch.tensor(sigma), torch.tensor(sigma_next), noise=_t(Z))


@pytest.mark.parametrize("eta", [-0.1, float("inf"), float("nan")])
def test_noise_level_must_be_finite_and_non_negative(eta: float) -> None:
    with pytest.raises(ValueError, match="noise_level"):
        DanceSDEConfig(noise_level=eta)
