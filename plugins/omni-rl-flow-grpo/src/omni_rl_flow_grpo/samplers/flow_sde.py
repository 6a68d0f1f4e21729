"""``flow_sde``: Flow-GRPO's reverse SDE step with its Gaussian log-prob (docs/math.md#flow-sde-sampler).

With noise level a, step σ → σ' (dt = σ' - σ < 0):

- s = a·sqrt(σ / (1 - σ̃)), σ̃ = σ_max (the schedule's first sigma below 1) where σ = 1, else σ̃ = σ
- μ = x·(1 + s²·dt/(2σ)) + v·(1 + s²(1 - σ)/(2σ))·dt
- x' = μ + s·sqrt(-dt)·z
- log p = mean[-(x' - μ)²/(2(s·sqrt(-dt))²) - log(s·sqrt(-dt)) - log sqrt(2π)]

The operations follow the reference ``sde_step_with_logprob`` (flow_grpo) in order, so results agree with
it to the last bit in float32. With a = 0 the mean is exactly the Euler step x + v·dt.
"""

from __future__ import annotations

import torch
from torch import Tensor

from omni_rl.batch import SamplerStep
from omni_rl_flow_grpo.config import FlowSDEConfig
from omni_rl_flow_grpo.samplers._tensors import (
    as_f32,
    flat_per_sample,
    gaussian_log_prob,
    next_sample,
    per_sample,
)
from omni_rl_flow_grpo.samplers.windowed import WindowedSampler


class FlowSDESampler(WindowedSampler):
    """Flow-GRPO's SDE sampler; stochastic unless ``noise_level`` is 0."""

    def __init__(self, config: FlowSDEConfig) -> None:
        self.config = config
        #: a zero noise level has no density to score, so it behaves as a deterministic sampler
        self.stochastic: bool = config.noise_level > 0

    def _noise_scale(self, sig: Tensor, sigma_max: Tensor | None, x: Tensor) -> Tensor:
        """s = a·sqrt(σ / (1 - σ̃)), broadcast like ``sig``; exactly 0 when a = 0.

        σ = 1 would give 1/(1 - 1), so the reference substitutes σ̃ = σ_max (the schedule's first sigma
        below 1) there. With a = 0 no σ̃ is needed (and 0·inf would be NaN), so s is set to zeros, which
        makes the mean below bit-for-bit the Euler step x + v·dt.
        """
        if not self.stochastic:
            return torch.zeros_like(sig)
        if sigma_max is not None:
            sig_tilde = torch.where(sig == 1, per_sample(sigma_max, x), sig)
        elif bool((sig == 1).any()):
            raise ValueError(
                "flow_sde: a step starts at sigma == 1, where the noise scale uses sigma_max (the "
                "schedule's first sigma below 1, Trajectory.sigma_max) instead of sigma; pass sigma_max"
            )
        else:
            sig_tilde = sig
        return torch.sqrt(sig / (1 - sig_tilde)) * self.config.noise_level

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
        """One step σ → σ' (per-sample (B,) sigmas); ``sigma_max`` is required wherever σ == 1.

        ``std_dev_t`` is s (shape (B,)), without the sqrt(-dt) factor. ``log_prob`` is None when the
        noise level is 0 (the step is then the deterministic Euler step and has no density).
        """
        x, velocity = as_f32(x), as_f32(velocity)
        sig = per_sample(sigma, x)
        sig_next = per_sample(sigma_next, x)
        dt = sig_next - sig
        std_dev_t = self._noise_scale(sig, sigma_max, x)
        mean = x * (1 + std_dev_t**2 / (2 * sig) * dt) + velocity * (1 + std_dev_t**2 * (1 - sig) / (2 * sig)) * dt
        scale = std_dev_t * torch.sqrt(-1 * dt)
        sample = next_sample(mean, scale if self.stochastic else None, noise, prev_sample)

        log_prob = gaussian_log_prob(sample, mean, scale) if self.stochastic else None
        return SamplerStep(
            sample=sample,
            mean=mean,
            std_dev_t=flat_per_sample(std_dev_t, x.shape[0]),
            log_prob=log_prob,
            scale=flat_per_sample(scale, x.shape[0]) if self.stochastic else None,
        )
