"""Flow-DPPO's trust region (docs/math.md#flow-dppo-loss; the UniRL reference ``unirl/algorithms/flowdppo.py``).

A single-sample ratio is a noisy estimate of how far the policy moved, but each step is Gaussian, so the divergence
between the old and the new transition is exact and cheap: with the same std σ_t for both,

    KL_new,old = mean_dims (μ_θ − μ_old)² / (2σ_t²),   σ_t = the std of x' given x (``SamplerStep.scale``)

(s·sqrt(−dt) for flow_sde, s for cps: the sampler's actual std, whatever its log-prob's normalisation; the
current step's, which the old step shares, as the std depends on the schedule and noise level, not on weights). A step
is dropped (weight 0, still counted in the mean) when it is outside the region, KL ≥ ``kl_mask_threshold``, *and*
the update would move it further out: ρ > 1 with A > 0, or ρ < 1 with A < 0. Steps that move back towards the old
policy are always kept, which is what makes the mask asymmetric, unlike PPO's clip.

cps. Its log-prob −mean(x' − μ)² is the Gaussian one times 2s² minus constants, so its log-ratio has the same sign
as the Gaussian log-ratio: the mask keeps and drops exactly the steps it would with a normalised density, and the
kept steps' objective −Aρ is flow_grpo's cps objective (the reference implementations' scale). Only the window's
last step is out: there σ' = 0 makes cps's std 0 and the KL 0/0 (``flow_dppo``'s config check refuses it).
"""

from __future__ import annotations

import attrs
import torch
from torch import Tensor


@attrs.frozen
class TrustRegion:
    """Per sample (B,), no gradient: KL_new,old and whether the step is dropped."""

    kl: Tensor
    dropped: Tensor


@torch.no_grad()
def trust_region(
    mean: Tensor, old_mean: Tensor, scale: Tensor, ratio: Tensor, advantages: Tensor, threshold: float
) -> TrustRegion:
    """KL_new,old = mean_dims(μ_θ − μ_old)²/(2·scale²) and the mask KL ≥ threshold ∧ (ρ > 1 ∧ A > 0 ∨ ρ < 1 ∧ A < 0)."""
    batch = ratio.shape[0]
    kl = ((mean.detach() - old_mean.detach()) ** 2).reshape(batch, -1).mean(dim=1) / (2 * scale.detach() ** 2)
    ratio = ratio.detach()
    away = ((ratio > 1) & (advantages > 0)) | ((ratio < 1) & (advantages < 0))
    return TrustRegion(kl=kl, dropped=(kl >= threshold) & away)
