"""``dance_sde``: DanceGRPO's reverse SDE step with its exact Gaussian log-prob (docs/math.md#dancegrpo-sde-sampler).

With noise level η, step σ → σ' (dt = σ' - σ < 0):

- x̂₀ = x - σ·v; score = -(x - (1 - σ)·x̂₀)/σ²
- μ = x + dt·v - ½η²·score·dt; s = η·sqrt(σ - σ'); x' = μ + s·z
- log p = mean[-(x' - μ)²/(2s²) - log s - log sqrt(2π)]

Reference: Xue et al., "DanceGRPO: Unleashing GRPO on Visual Generation" (2025), XueZeyue/DanceGRPO's ``flux_step``
(``fastvideo/train_grpo_flux.py``, the same step in its SD and HunyuanVideo trainers, ``sde_solver = True``). The
operations follow it in order (the Euler mean first, then the score term), so with η = 0 the mean is bit for bit
the Euler step x + v·dt, which is what this sampler returns there (no noise, no log-prob).

The log-prob differs from the reference on purpose. In ``flux_step`` the parenthesised log-density closes after
the quadratic term, and the ``- log(std_dev_t) - log(sqrt(2π))`` on the next line is a separate expression
statement, evaluated and thrown away: the reference's log-prob is the quadratic term alone. docs/math.md asks for the
exact Gaussian log-density, constants included, and that is what this returns. The constants do not depend on the
policy (s is fixed by the schedule and η), so they cancel in the ratio exp(log π_θ - log π_old), in its gradient
and in every clipped or KL term built on it: training matches the reference's; only the logged log-prob's level
differs (by -log s - log sqrt(2π) per step).

Written this way the step is flow_sde's SDE with a constant diffusion coefficient: since x - (1 - σ)·x̂₀ =
σ·(x + (1 - σ)·v), μ = x + v·dt + η²/(2σ)·(x + (1 - σ)·v)·dt, flow_sde's mean with its s replaced by η. So
η = a·sqrt(σ/(1 - σ)) gives flow_sde's step at one σ; a constant η puts relatively more noise on the late,
low-σ steps than flow_sde does. The mean is computed here in DanceGRPO's order of operations rather than through
flow_sde's (the two agree to float32 rounding, a test checks it); the Gaussian log-density is flow_sde's own
(``gaussian_log_prob``).

``std_dev_t`` and ``scale`` are both s = η·sqrt(σ - σ'), the actual std of x' (as cps reports its own): the KL to
the reference divides by it (docs/math.md#kl-to-the-reference), and Flow-DPPO's trust region uses it as the
Gaussian's std.
"""

from __future__ import annotations

import torch
from omni_rl_flow_grpo.samplers._tensors import as_f32, flat_per_sample, gaussian_log_prob, next_sample, per_sample
from omni_rl_flow_grpo.samplers.windowed import WindowedSampler
from torch import Tensor

from omni_rl.batch import SamplerStep
from omni_rl_dance_grpo.config import DanceSDEConfig


class DanceSDESampler(WindowedSampler):
    """DanceGRPO's SDE sampler; stochastic unless ``noise_level`` is 0."""

    def __init__(self, config: DanceSDEConfig) -> None:
        self.config = config
        #: η = 0 is the Euler step: nothing is drawn, scored or trained
        self.stochastic: bool = config.noise_level > 0

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
        """One step σ → σ' (per-sample (B,) sigmas, σ' < σ); ``sigma_max`` is accepted and unused (σ = 1 is fine:
        the score is then -x). ``log_prob`` is None when η = 0."""
        x, velocity = as_f32(x), as_f32(velocity)
        sig = per_sample(sigma, x)
        sig_next = per_sample(sigma_next, x)
        dt = sig_next - sig
        batch = x.shape[0]
        mean = x + dt * velocity
        if not self.stochastic:  # exactly the Euler step: no score term, nothing drawn or scored
            sample = next_sample(mean, None, noise, prev_sample)
            return SamplerStep(
                sample=sample, mean=mean, std_dev_t=flat_per_sample(torch.zeros_like(sig), batch), log_prob=None
            )
        if bool(((dt >= 0) | (sig <= 0)).any()):  # one host sync per step
            raise ValueError(
                "dance_sde: every step must go down in sigma, 0 < sigma_next < sigma or sigma_next = 0 < sigma "
                f"(its std is eta * sqrt(sigma - sigma_next)); got sigma {sigma.tolist()} and sigma_next "
                f"{sigma_next.tolist()}"
            )
        eta = self.config.noise_level
        pred_x0 = x - sig * velocity
        score = -(x - pred_x0 * (1 - sig)) / sig**2
        mean = mean + (-0.5 * eta**2 * score) * dt
        std = eta * torch.sqrt(-dt)
        sample = next_sample(mean, std, noise, prev_sample)
        std_flat = flat_per_sample(std, batch)
        return SamplerStep(
            sample=sample, mean=mean, std_dev_t=std_flat, log_prob=gaussian_log_prob(sample, mean, std), scale=std_flat
        )
