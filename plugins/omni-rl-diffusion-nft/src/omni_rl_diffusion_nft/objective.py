"""DiffusionNFT's objective at one timestep draw, given the three velocities (docs/math.md#diffusionnft-loss).

For each sample, with t its timestep, x_t = (1 − t)x₀ + tε and r its reward probability:

- implicit positive and negative policies: v⁺ = βv_θ + (1 − β)v_old, v⁻ = (1 + β)v_old − βv_θ;
- their clean predictions x̂₀^± = x_t − t·v^±;
- adaptive weights w^± = max(mean_dims |x̂₀^± − x₀|, 1e-5), computed in float64 without gradient;
- ℓ^± = mean_dims (x̂₀^± − x₀)² / w^±;
- policy loss = A_max · mean_b[(r·ℓ⁺ + (1 − r)·ℓ⁻) / β]; KL = mean_b mean_dims (v_θ − v_ref)²;
- loss = policy loss + β_KL · KL.

This is the reference implementation's arithmetic (NVlabs/DiffusionNFT, ``scripts/train_nft_sd3.py``), which
differs from the paper's equations in the adaptive weights and the A_max scale (the paper writes a plain squared
error with r ∈ [0, 1] from a normalised reward). One deliberate difference in precision, not math: the
reference divides by the float64 weights and so computes ℓ^± and the loss in float64; here the weights are
computed in float64 as there and then cast to float32, so the loss stays float32 like every other loss (the
relative difference is ~1e-7).
"""

from __future__ import annotations

import attrs
import torch
from torch import Tensor

#: lower bound of the adaptive weights (the reference's ``clip(min=0.00001)``)
WEIGHT_FLOOR = 1e-5


@attrs.frozen(kw_only=True)
class NFTObjective:
    """The loss to backpropagate and its parts (per-sample parts have shape (B,))."""

    loss: Tensor
    policy_loss: Tensor
    #: mean_dims (x̂₀⁺ − x₀)² / w⁺ and the negative branch's, per sample
    positive_loss: Tensor
    negative_loss: Tensor
    #: mean (v_θ − v_ref)², None without a reference view
    kl: Tensor | None


def _per_sample_mean(value: Tensor) -> Tensor:
    return value.mean(dim=tuple(range(1, value.ndim)))


def _adaptive_weight(x0_hat: Tensor, x0: Tensor) -> Tensor:
    """max(mean_dims |x̂₀ − x₀|, 1e-5) in float64 without gradient, shaped to broadcast over x₀ (B, 1, …)."""
    with torch.no_grad():
        error = (x0_hat.detach().double() - x0.double()).abs()
        weight = error.mean(dim=tuple(range(1, error.ndim)), keepdim=True).clamp(min=WEIGHT_FLOOR)
    return weight.to(torch.float32)


def nft_objective(
    *,
    x0: Tensor,
    x_t: Tensor,
    t: Tensor,
    v_theta: Tensor,
    v_old: Tensor,
    reward_prob: Tensor,
    beta: float,
    adv_clip_max: float,
    v_ref: Tensor | None = None,
    kl_coef: float = 0.0,
) -> NFTObjective:
    """The objective for one micro-batch: ``t`` and ``reward_prob`` have shape (B,), the rest (B, C, h, w).

    Only ``v_theta`` carries a gradient; ``v_old`` and ``v_ref`` are treated as constants. Everything is upcast
    to float32 first (bf16 velocities would lose the small differences between v_θ and v_old).
    """
    x0, x_t, v_theta = x0.float(), x_t.float(), v_theta.float()
    v_old = v_old.detach().float()
    t_b = t.float().reshape(-1, *([1] * (x0.ndim - 1)))
    r = reward_prob.float().reshape(-1)

    v_pos = beta * v_theta + (1.0 - beta) * v_old
    v_neg = (1.0 + beta) * v_old - beta * v_theta
    x0_pos = x_t - t_b * v_pos
    x0_neg = x_t - t_b * v_neg
    positive = _per_sample_mean((x0_pos - x0) ** 2 / _adaptive_weight(x0_pos, x0))
    negative = _per_sample_mean((x0_neg - x0) ** 2 / _adaptive_weight(x0_neg, x0))
    per_sample = r * positive / beta + (1.0 - r) * negative / beta
    policy_loss = (per_sample * adv_clip_max).mean()

    loss = policy_loss
    kl = None
    if v_ref is not None:
        kl = _per_sample_mean((v_theta - v_ref.detach().float()) ** 2).mean()
        loss = policy_loss + kl_coef * kl
    return NFTObjective(loss=loss, policy_loss=policy_loss, positive_loss=positive, negative_loss=negative, kl=kl)
