"""``cps``: Coefficients-Preserving Sampling (docs/math.md#cps-sampler), as in flow_grpo's ``sde_type = "cps"``.

With noise level η, step σ → σ':

- s = σ'·sin(η·π/2); x̂₀ = x - σ·v; x̂₁ = x + (1 - σ)·v
- μ = (1 - σ')·x̂₀ + sqrt(σ'² - s²)·x̂₁; x' = μ + s·z
- log p = -mean (x' - μ)²

The log-prob is the reference implementation's, not a normalised Gaussian density: it drops the 1/(2s²)
scale and every constant. Ratios and gradients therefore differ from a true density by a per-step scale;
that is what users of the reference compare against, so it is kept. At σ' = 0 (the last step) s = 0: the
step is deterministic, x' = x̂₀, and log p ≡ 0.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from omni_rl.batch import SamplerStep
from omni_rl_flow_grpo.config import CPSConfig
from omni_rl_flow_grpo.samplers._tensors import (
    as_f32,
    flat_per_sample,
    mean_over_sample,
    next_sample,
    per_sample,
)
from omni_rl_flow_grpo.samplers.windowed import WindowedSampler


class CPSSampler(WindowedSampler):
    """Coefficients-preserving sampler; stochastic unless ``noise_level`` is 0."""

    def __init__(self, config: CPSConfig) -> None:
        self.config = config
        #: η = 0 makes s = 0 everywhere (the Euler step), with nothing to score or train
        self.stochastic: bool = config.noise_level > 0
        self._sin = math.sin(config.noise_level * math.pi / 2)

    def step(
        self,
        x: Tensor,
        velocity: Tensor,
        sigma: Tensor,
        sigma_next: Tensor,
        *,
        sigma_max: Tensor | None = None,
        noise: Tensor | None = None,
        prev_sample: Tensor | None = None,
    ) -> SamplerStep:
        """One step σ → σ' (per-sample (B,) sigmas); ``sigma_max`` is accepted and unused.

        ``std_dev_t`` is s = σ'·sin(η·π/2), shape (B,). ``log_prob`` is None when η = 0.
        """
        x, velocity = as_f32(x), as_f32(velocity)
        sig = per_sample(sigma, x)
        sig_next = per_sample(sigma_next, x)

        std_dev_t = sig_next * self._sin
        pred_x0 = x - sig * velocity
        pred_x1 = x + velocity * (1 - sig)
        # σ'² - s² = σ'²·cos²(ηπ/2) >= 0; the clamp only guards rounding at η = 1 (where it is exactly 0)
        mean = pred_x0 * (1 - sig_next) + pred_x1 * torch.sqrt((sig_next**2 - std_dev_t**2).clamp_min(0))
        sample = next_sample(mean, std_dev_t if self.stochastic else None, noise, prev_sample)

        log_prob = mean_over_sample(-((sample.detach() - mean) ** 2)) if self.stochastic else None
        return SamplerStep(
            sample=sample,
            mean=mean,
            std_dev_t=flat_per_sample(std_dev_t, x.shape[0]),
            log_prob=log_prob,
            scale=flat_per_sample(std_dev_t, x.shape[0]) if self.stochastic else None,
        )
