"""dance_sde on video latents (B, C, F, h, w): the step equals the step on the latents flattened to 4-D, and the
log-prob is the mean over every non-batch dimension of the Gaussian density (docs/math.md#conventions)."""

from __future__ import annotations

import math

import pytest
import torch
from omni_rl_dance_grpo.config import DanceSDEConfig
from omni_rl_dance_grpo.sampler import DanceSDESampler

SHAPE = (2, 3, 4, 5, 6)


def test_dance_sde_on_5d_latents() -> None:
    g = torch.Generator().manual_seed(0)
    x, v, z = (torch.randn(SHAPE, generator=g) for _ in range(3))
    sigma, sigma_next = torch.tensor([0.8, 0.5]), torch.tensor([0.6, 0.3])
    sampler = DanceSDESampler(DanceSDEConfig(noise_level=0.3))
    video = sampler.step(x, v, sigma, sigma_next, noise=z)

    def flat(t: torch.Tensor) -> torch.Tensor:
        return t.reshape(2, -1, 5, 6)

    image = sampler.step(flat(x), flat(v), sigma, sigma_next, noise=flat(z))
    torch.testing.assert_close(flat(video.sample), image.sample, rtol=0, atol=0)
    torch.testing.assert_close(video.log_prob, image.log_prob, rtol=1e-6, atol=1e-6)
    for b in range(2):
        std = float(video.scale[b])
        diff = (video.sample[b] - video.mean[b]).double()
        density = -(diff**2) / (2 * std**2) - math.log(std) - 0.5 * math.log(2 * math.pi)
        assert float(video.log_prob[b]) == pytest.approx(float(density.mean()), rel=1e-5)
