"""The clipped-ratio (PPO) policy objective and its diagnostics, shared by every loss that scores a policy by a
per-sample log-likelihood: ``flow_grpo`` (per-step SDE log-probs) and AWM (its weighted flow-matching loss as
a log-likelihood surrogate) compute the same objective on different log-probs (docs/math.md#flow-grpo-loss).

- ρ = exp(log π_θ − log π_old)
- policy_loss = mean max(−Â·ρ, −Â·clip(ρ, 1 − ε, 1 + ε)), Â the already clipped (and scaled) advantages
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor


def clipped_objective(ratio: Tensor, clipped_advantages: Tensor, clip_ratio: float) -> Tensor:
    """The per-sample terms max(−Â·ρ, −Â·clip(ρ, 1 − ε, 1 + ε)), for losses that weight them before the mean
    (GRPO-Guard's per-step reweighting) or build ρ differently (its normalised ratio)."""
    unclipped = -clipped_advantages * ratio
    clipped = -clipped_advantages * ratio.clamp(1.0 - clip_ratio, 1.0 + clip_ratio)
    return torch.maximum(unclipped, clipped)


def clipped_policy_loss(
    log_prob: Tensor, old_log_prob: Tensor, clipped_advantages: Tensor, clip_ratio: float
) -> tuple[Tensor, Tensor]:
    """(policy_loss, ρ); ρ keeps its graph so the caller can log it after detaching."""
    ratio = torch.exp(log_prob - old_log_prob)
    return clipped_objective(ratio, clipped_advantages, clip_ratio).mean(), ratio


@torch.no_grad()
def ratio_metrics(
    ratio: Tensor, log_prob: Tensor, old_log_prob: Tensor, advantages: Tensor, clip_ratio: float
) -> dict[str, Any]:
    """Plain-float diagnostics of one micro-batch, named as the reference trainer prints them.

    ``ratio_std`` is the population std (defined for a batch of one); the clip fractions count |ρ − 1| > ε;
    ``approx_kl`` is the reference's 0.5·mean((log π_θ − log π_old)²), next to ``ppo_kl`` = mean(log π_old −
    log π_θ); ``advantage_abs_mean`` is over the advantages before clipping, as the reference prints it.
    """
    ratio = ratio.detach()
    log_diff = log_prob.detach() - old_log_prob.detach()
    return {
        "ratio_mean": float(ratio.mean()),
        "ratio_std": float(ratio.std(correction=0)),
        "clip_frac": float(((ratio - 1.0).abs() > clip_ratio).float().mean()),
        "clip_frac_high": float((ratio - 1.0 > clip_ratio).float().mean()),
        "clip_frac_low": float((1.0 - ratio > clip_ratio).float().mean()),
        "ppo_kl": float((-log_diff).mean()),
        "approx_kl": float(0.5 * (log_diff**2).mean()),
        "advantage_abs_mean": float(advantages.abs().mean()),
    }
