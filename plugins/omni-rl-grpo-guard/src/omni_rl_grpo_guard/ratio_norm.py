"""GRPO-Guard's RatioNorm and per-step reweighting (docs/math.md#grpo-guard-loss; arXiv 2510.22319).

Why the ratio needs normalising. A stochastic step is Gaussian, x' ~ N(μ, σ_t² I), and the log-prob is the mean
over the D latent elements. With the stored x' = μ_old + σ_t·ε and Δ = μ_θ − μ_old:

    log π_θ(x') − log π_old(x') = mean(ε·Δ)/σ_t − mean(Δ²)/(2σ_t²)

The second term is ≤ 0 whatever the noise: it is the bias b = mean(Δ²)/(2σ_t²) that pulls the ratio's mean below
1 (the left shift the paper measures), so positive-advantage samples rarely reach the upper clip. The first term is
zero-mean but scales as 1/σ_t, so its spread differs from step to step. RatioNorm adds b back and multiplies by
c = σ_t, leaving mean(ε·Δ): centred on 0 and on one scale across steps,

    ρ = exp((log π_θ − log π_old + b)·c),   b = mean_dims(μ_θ − μ_old)²/(2c²)

and the gradient reweighting divides each step's clipped term by (sqrt(−dt))² = −dt, equalising the gradient
across noise levels. The gradient flows through log π_θ and, via b, through μ_θ (as in VeRL-Omni).

c per sample. VeRL-Omni's ``compute_diffusion_loss_grpo_guard`` (docs/math.md#grpo-guard-loss) takes one c per call,
c = mean_b(sqrt(−dt))·mean_b(s), and divides the batch mean by mean_b(sqrt(−dt))². Here c is each sample's own
std of x' (``SamplerStep.scale`` of the current step, which the old step shares: it depends on the schedule and the
noise level, not on the weights; s·sqrt(−dt) for flow_sde) and the weight each sample's own 1/(−dt). When the
samples of a call share a schedule step (the reference's only case) the two are the same numbers (a test checks
it on flow_sde); when a call mixes steps (DanceGRPO's timestep_fraction) only the per-sample form removes each
sample's own bias, as the derivation above needs. Flow-Factory's GRPO-Guard trainer is per sample too.

Only for a normalised Gaussian log-prob. ``cps`` scores a step by −mean(x' − μ)² (no 1/(2s²), no constants), so
its log-ratio is 2s·mean(ε·Δ) − mean(Δ²): its bias would be mean(Δ²) and its c 1/(2s), not the formulas above.
``grpo_guard``'s config check refuses cps (the reference implementations require Flow-GRPO's SDE too).
"""

from __future__ import annotations

import attrs
import torch
from torch import Tensor


@attrs.frozen
class NormalisedRatio:
    """RatioNorm of one call, per sample (B,): the normalised ratio (with its graph), the bias b, the raw log-ratio
    log π_θ − log π_old and the scale c."""

    ratio: Tensor
    bias: Tensor
    log_ratio: Tensor
    scale: Tensor


def ratio_norm(
    log_prob: Tensor, old_log_prob: Tensor, mean: Tensor, old_mean: Tensor, scale: Tensor
) -> NormalisedRatio:
    """ρ = exp((log π_θ − log π_old + b)·c), b = mean_dims(μ_θ − μ_old)²/(2c²), c = ``scale`` (B,), all float32.

    ``old_log_prob``, ``old_mean`` and ``scale`` carry no gradient (the old policy and the sampler's std).
    """
    batch = log_prob.shape[0]
    c = scale.detach()
    diff = mean - old_mean.detach()
    bias = (diff**2).reshape(batch, -1).mean(dim=1) / (2 * c**2)
    log_ratio = log_prob - old_log_prob.detach()
    return NormalisedRatio(ratio=torch.exp((log_ratio + bias) * c), bias=bias, log_ratio=log_ratio, scale=c)


def step_weights(sigmas: Tensor, next_sigmas: Tensor) -> Tensor:
    """1/(sqrt(−dt))² = 1/(σ − σ') per sample: GRPO-Guard's reweighting of each step's clipped term."""
    neg_dt = (sigmas - next_sigmas).detach()
    if bool((neg_dt <= 0).any()):
        raise ValueError(f"grpo_guard: a step with sigma' >= sigma (dt = {(-neg_dt).tolist()}) has no reweighting")
    return 1.0 / neg_dt
