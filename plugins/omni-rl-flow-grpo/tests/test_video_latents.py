"""Latents of any rank (videos: (B, C, F, h, w)): every sampler step on 5-D latents equals the same step on the
latents flattened to (B, C·F, h, w) element by element, and the log-prob stays the mean over every non-batch
dimension (docs/math.md#conventions), checked against the Gaussian density computed here by hand."""

from __future__ import annotations

import math

import pytest
import torch
from omni_rl_flow_grpo.config import CPSConfig, FlowSDEConfig
from omni_rl_flow_grpo.samplers.cps import CPSSampler
from omni_rl_flow_grpo.samplers.flow_sde import FlowSDESampler
from omni_rl_flow_grpo.samplers.ode_solvers import build_solver

SHAPE = (2, 3, 4, 5, 6)  # B, C, F, h, w: every axis a different size, so a wrong reduction shows


def _draws(seed: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(SHAPE, generator=g) for _ in range(3))


def _flat(t: torch.Tensor) -> torch.Tensor:
    return t.reshape(t.shape[0], -1, *t.shape[3:])


@pytest.mark.parametrize(
    "sampler", [FlowSDESampler(FlowSDEConfig(noise_level=0.7)), CPSSampler(CPSConfig(noise_level=0.8))]
)
def test_5d_step_equals_the_flattened_step(sampler: object) -> None:
    x, v, z = _draws(0)
    sigma, sigma_next = torch.tensor([0.8, 0.5]), torch.tensor([0.6, 0.3])
    video = sampler.step(x, v, sigma, sigma_next, sigma_max=torch.tensor([0.95, 0.95]), noise=z)  # type: ignore[attr-defined]
    image = sampler.step(  # type: ignore[attr-defined]
        _flat(x), _flat(v), sigma, sigma_next, sigma_max=torch.tensor([0.95, 0.95]), noise=_flat(z)
    )
    assert video.sample.shape == SHAPE and video.log_prob.shape == (2,)
    torch.testing.assert_close(_flat(video.sample), image.sample, rtol=0, atol=0)
    torch.testing.assert_close(video.log_prob, image.log_prob, rtol=1e-6, atol=1e-6)
    rescored = sampler.step(x, v, sigma, sigma_next, sigma_max=torch.tensor([0.95, 0.95]), prev_sample=video.sample)  # type: ignore[attr-defined]
    torch.testing.assert_close(rescored.log_prob, video.log_prob, rtol=0, atol=0)


def test_flow_sde_log_prob_is_the_mean_over_every_non_batch_dim() -> None:
    x, v, z = _draws(1)
    sigma, sigma_next = torch.tensor([0.8, 0.5]), torch.tensor([0.6, 0.3])
    out = FlowSDESampler(FlowSDEConfig(noise_level=0.7)).step(
        x, v, sigma, sigma_next, sigma_max=torch.tensor([0.95, 0.95]), noise=z
    )
    for b in range(2):
        std = float(out.scale[b])
        diff = (out.sample[b] - out.mean[b]).double()
        density = -(diff**2) / (2 * std**2) - math.log(std) - 0.5 * math.log(2 * math.pi)
        assert float(out.log_prob[b]) == pytest.approx(float(density.mean()), rel=1e-5)
        assert density.numel() == math.prod(SHAPE[1:])


@pytest.mark.parametrize("name", ["euler", "dpm_solver_2m"])
def test_ode_solvers_take_5d_latents(name: str) -> None:
    x, v, _ = _draws(2)
    video, image = build_solver(name), build_solver(name)
    sigmas = torch.tensor([1.0, 0.7, 0.4, 0.0])
    xv, xi = x, _flat(x)
    for i in range(3):
        s, s_next = sigmas[i].expand(2), sigmas[i + 1].expand(2)
        xv = video.step(xv, v * (i + 1), s, s_next)
        xi = image.step(xi, _flat(v) * (i + 1), s, s_next)
        torch.testing.assert_close(_flat(xv), xi, rtol=0, atol=0)
