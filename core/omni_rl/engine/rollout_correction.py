"""Rollout correction, the pure math (docs/math.md#rollout-correction): IS weights, rejection masks, diagnostics.

The rollout engine's policy π_rollout (another engine, another precision, or an older weights version) is not the
trainer's π_old. Per trained window step j of sample i there are the rollout's log-prob ℓʳ_ij and the trainer's
recompute ℓᵒ_ij with the behaviour version's weights; δ = ℓᵒ − ℓʳ.

Everything here works on (N, W) float tensors and is free of the runtime: the update engine calls
:func:`correction_weights` once per step (before the loss loop) and :func:`diagnostic_sums` for the metrics; the
driver merges the workers' sums with :func:`merge_diagnostics`. Sums rather than means travel, so that the merged
values are the whole batch's whatever the number of workers.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence

import attrs
import torch
from torch import Tensor

#: metric prefix of every diagnostic
PREFIX = "rollout_corr"

#: a sum across the worker group (``all_reduce``) for the batch normalisation; None = this worker holds it all
SumAcross = Callable[[Tensor], Tensor]


@attrs.frozen(kw_only=True)
class CorrectionResult:
    """What the update uses: ``weights`` (N, W) multiply each (sample, step) loss term (None: the identity, the
    loss is left exactly as without correction); ``is_weights`` the truncated (and normalised) IS weights, at
    step level (N, W) or sample level (N,) broadcast to (N, W); ``rejected`` (N, W) bool."""

    weights: Tensor | None
    is_weights: Tensor
    is_level: str
    rejected: Tensor


def importance_weights(delta: Tensor, level: str, threshold: float) -> Tensor:
    """Truncated IS weights: step level w_ij = min(exp(δ_ij), C) (N, W); sample level w_i = min(exp(Σ_j δ_ij), C)
    (N,). Computed in float64 so that δ = 0 gives exactly 1."""
    d = delta.to(torch.float64)
    if level == "step":
        return torch.exp(d).clamp(max=threshold)
    if level == "sample":
        return torch.exp(d.sum(dim=1)).clamp(max=threshold)
    raise ValueError(f"unknown IS level {level!r} (expected 'step' or 'sample')")


def normalise(weights: Tensor, sum_across: SumAcross | None = None) -> Tensor:
    """w / mean(w) over the whole batch (every worker's elements when ``sum_across`` sums across the group)."""
    stats = torch.stack([weights.sum(), torch.tensor(float(weights.numel()), dtype=weights.dtype)])
    if sum_across is not None:
        stats = sum_across(stats)
    mean = stats[0] / stats[1]
    return weights / mean if float(mean) > 0 else weights


def rejection_mask(delta: Tensor, rule: str, band: tuple[float, float]) -> Tensor:
    """(N, W) bool, True = rejected. ``step_k1``: exp(δ_ij) outside [L, U]; ``sample_mean_k1``: exp(mean_j δ_ij)
    outside the band rejects every step of sample i; ``sample_max_k1``: any step of sample i outside the band
    rejects the sample; ``off``: nothing."""
    low, high = band
    d = delta.to(torch.float64)
    if rule == "off":
        return torch.zeros_like(d, dtype=torch.bool)
    step_out = (torch.exp(d) < low) | (torch.exp(d) > high)
    if rule == "step_k1":
        return step_out
    if rule == "sample_mean_k1":
        ratio = torch.exp(d.mean(dim=1, keepdim=True))
        return ((ratio < low) | (ratio > high)).expand_as(d).clone()
    if rule == "sample_max_k1":
        return step_out.any(dim=1, keepdim=True).expand_as(d).clone()
    raise ValueError(f"unknown rejection rule {rule!r}")


def correction_weights(
    rollout_log_probs: Tensor,
    old_log_probs: Tensor,
    *,
    mode: str,
    is_level: str,
    is_threshold: float,
    normalize: bool,
    rejection: str,
    band: tuple[float, float],
    sum_across: SumAcross | None = None,
) -> CorrectionResult:
    """The loss weights of one step's batch. ``decoupled``: IS weight × (not rejected); ``bypass``: the IS weights
    are only logged and the loss weight is the rejection mask alone; ``off``: logged only. Weights are None (the
    identity, not a tensor of ones) wherever they cannot change the loss, so a run without correction is
    bit-identical to one before it existed."""
    delta = (old_log_probs.to(torch.float64) - rollout_log_probs.to(torch.float64)).detach()
    is_w = importance_weights(delta, is_level, is_threshold)
    if normalize:
        is_w = normalise(is_w, sum_across)
    rejected = rejection_mask(delta, rejection, band)
    per_step = is_w if is_level == "step" else is_w.unsqueeze(1).expand_as(delta)
    keep = (~rejected).to(torch.float64)
    weights: Tensor | None = None
    if mode == "decoupled":
        weights = (per_step * keep).to(torch.float32)
    elif mode == "bypass" and rejection != "off":
        weights = keep.to(torch.float32)
    return CorrectionResult(weights=weights, is_weights=is_w, is_level=is_level, rejected=rejected)


def diagnostic_sums(
    rollout_log_probs: Tensor, old_log_probs: Tensor, result: CorrectionResult, step_indices: Tensor | None = None
) -> dict[str, float]:
    """Sufficient statistics of the diagnostics on this worker's samples (merge with :func:`merge_diagnostics`).

    Keys: ``n_steps``, ``n_samples``, ``abs_delta_sum``, ``abs_delta_max``, ``kl_sum`` (Σ ℓʳ − ℓᵒ), ``k3_sum``
    (Σ exp(δ) − 1 − δ), ``w_n``, ``w_sum``, ``w_sq_sum``, ``w_max``, ``w_min`` (of the IS weights, one per step or
    per sample by level), ``rejected_steps``, ``rejected_samples``, and per schedule step j
    ``abs_delta_sum/step_j``, ``abs_delta_max/step_j``, ``n/step_j``."""
    delta = old_log_probs.to(torch.float64) - rollout_log_probs.to(torch.float64)
    n, w = delta.shape
    abs_delta = delta.abs()
    is_w = result.is_weights.to(torch.float64)
    out: dict[str, float] = {
        "n_steps": float(n * w),
        "n_samples": float(n),
        "abs_delta_sum": float(abs_delta.sum()),
        "abs_delta_max": float(abs_delta.max()) if delta.numel() else 0.0,
        "kl_sum": float((-delta).sum()),
        "k3_sum": float((torch.exp(delta) - 1.0 - delta).sum()),
        "w_n": float(is_w.numel()),
        "w_sum": float(is_w.sum()),
        "w_sq_sum": float((is_w**2).sum()),
        "w_max": float(is_w.max()) if is_w.numel() else -math.inf,
        "w_min": float(is_w.min()) if is_w.numel() else math.inf,
        "rejected_steps": float(result.rejected.sum()),
        "rejected_samples": float(result.rejected.any(dim=1).sum()) if w else 0.0,
    }
    steps = step_indices if step_indices is not None else torch.arange(w).expand(n, w)
    for j in sorted(set(int(s) for s in steps.reshape(-1).tolist())):
        at = abs_delta[steps == j]
        out[f"abs_delta_sum/step_{j}"] = float(at.sum())
        out[f"abs_delta_max/step_{j}"] = float(at.max())
        out[f"n/step_{j}"] = float(at.numel())
    return out


def _is_max(key: str) -> bool:
    return key.startswith(("abs_delta_max", "w_max"))


def merge_sums(parts: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """The workers' sums as one: maxima by max, minima by min, the rest added."""
    merged: dict[str, float] = defaultdict(float)
    for part in parts:
        for key, value in part.items():
            if key not in merged:
                merged[key] = value
            elif _is_max(key):
                merged[key] = max(merged[key], value)
            elif key == "w_min":
                merged[key] = min(merged[key], value)
            else:
                merged[key] += value
    return dict(merged)


def merge_diagnostics(parts: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """``rollout_corr/*`` metrics of the whole batch from the workers' :func:`diagnostic_sums` (empty: none)."""
    parts = [p for p in parts if p]
    if not parts:
        return {}
    s = merge_sums(parts)
    steps, w_n = max(s["n_steps"], 1.0), max(s["w_n"], 1.0)
    metrics = {
        "abs_delta_mean": s["abs_delta_sum"] / steps,
        "abs_delta_max": s["abs_delta_max"],
        "kl": s["kl_sum"] / steps,
        "k3": s["k3_sum"] / steps,
        "is_weight_mean": s["w_sum"] / w_n,
        "is_weight_max": s["w_max"],
        "is_weight_min": s["w_min"],
        "ess": (s["w_sum"] ** 2) / (w_n * s["w_sq_sum"]) if s["w_sq_sum"] > 0 else 0.0,
        "rejected_step_fraction": s["rejected_steps"] / steps,
        "rejected_sample_fraction": s["rejected_samples"] / max(s["n_samples"], 1.0),
    }
    for key, value in s.items():
        if key.startswith("abs_delta_sum/step_"):
            j = key.rsplit("_", 1)[1]
            metrics[f"abs_delta_mean/step_{j}"] = value / max(s[f"n/step_{j}"], 1.0)
        elif key.startswith("abs_delta_max/step_"):
            metrics[key] = value
    return {f"{PREFIX}/{k}": v for k, v in metrics.items()}
