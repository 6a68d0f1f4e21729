"""Flow-DPPO on real cps steps: the trust region's KL uses cps's actual std s = σ'·sin(ηπ/2), and because cps's
log-prob −mean(x' − μ)² is the Gaussian one times 2s² (plus constants that cancel), the ratio sides the mask
compares (ρ > 1, ρ < 1) are those of the normalised Gaussian log-ratio: the mask drops exactly the same steps."""

from __future__ import annotations

import math

import pytest
import torch
from omni_rl_flow_dppo.config import FlowDPPOLossConfig
from omni_rl_flow_dppo.loss import FlowDPPOLoss
from omni_rl_flow_grpo.config import CPSConfig
from omni_rl_flow_grpo.samplers.cps import CPSSampler

from omni_rl.batch import TrajectoryLossInputs

B, SHAPE, ETA = 6, (4, 5, 5), 0.8


def test_cps_kl_uses_the_actual_std_and_the_mask_sides_agree_with_the_gaussian() -> None:
    sampler = CPSSampler(CPSConfig(noise_level=ETA))
    g = torch.Generator().manual_seed(3)
    x, v_old = torch.randn(B, *SHAPE, generator=g), torch.randn(B, *SHAPE, generator=g)
    v = v_old + 0.05 * torch.randn(B, *SHAPE, generator=g)
    sigma, sigma_next = torch.full((B,), 0.7), torch.full((B,), 0.5)
    old = sampler.step(x, v_old, sigma, sigma_next, noise=torch.randn(B, *SHAPE, generator=g))
    current = sampler.step(x, v, sigma, sigma_next, prev_sample=old.sample)
    s = 0.5 * math.sin(ETA * math.pi / 2)
    assert torch.allclose(current.scale, torch.full((B,), s))

    diff = current.mean - old.mean
    kl = (diff**2).reshape(B, -1).mean(dim=1) / (2 * s**2)
    threshold = float(kl.median())  # half the steps outside the region
    advantages = torch.tensor([1.0, -1.0, 2.0, -2.0, 0.5, -0.5])
    inputs = TrajectoryLossInputs(current=current, old_log_prob=old.log_prob, advantages=advantages, old=old)
    out = FlowDPPOLoss(FlowDPPOLossConfig(kl_mask_threshold=threshold))(inputs)
    assert out.metrics["kl_new_old"] == pytest.approx(float(kl.mean()), rel=1e-5)

    def gaussian(mu: torch.Tensor) -> torch.Tensor:  # the normalised density with std s, mean over dims
        return (
            (-((old.sample - mu) ** 2) / (2 * s**2) - math.log(s) - 0.5 * math.log(2 * math.pi)).reshape(B, -1).mean(1)
        )

    gaussian_log_ratio = gaussian(current.mean) - gaussian(old.mean)
    cps_log_ratio = current.log_prob - old.log_prob
    assert torch.equal(torch.sign(cps_log_ratio), torch.sign(gaussian_log_ratio))
    torch.testing.assert_close(cps_log_ratio, 2 * s**2 * gaussian_log_ratio, rtol=1e-3, atol=1e-7)
    away = ((gaussian_log_ratio > 0) & (advantages > 0)) | ((gaussian_log_ratio < 0) & (advantages < 0))
    expected_dropped = (kl >= threshold) & away
    assert 0 < int(expected_dropped.sum()) < B
    assert out.metrics["dppo_masked_fraction"] == float(expected_dropped.float().mean())
