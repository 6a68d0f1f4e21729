"""Per-timestep metrics: a value's mean over the samples at each schedule step, with how many samples it covers.

GRPO-Guard's case against Flow-GRPO is the importance ratio's mean per denoising step (left-shifted, with a
spread that differs from step to step), so every policy-gradient loss logs ``ratio_mean/step_<j>``. One call of
the loss sees one window column, which may hold several schedule steps (DanceGRPO's timestep_fraction draws the
trained steps per sample), so the grouping is by each sample's own step index, and each mean carries its sample
count (``LossOutput.metric_counts``): the driver then averages it over exactly the samples at that step.
"""

from __future__ import annotations

import torch
from torch import Tensor


@torch.no_grad()
def per_step_means(name: str, values: Tensor, step_indices: Tensor | None) -> tuple[dict[str, float], dict[str, int]]:
    """``({f"{name}/step_{j}": mean of values at step j}, {same key: count})`` for every step present; empty
    when the caller gave no step indices (a loss called outside the trajectory update)."""
    if step_indices is None:
        return {}, {}
    steps = step_indices.detach().reshape(-1).to(values.device)
    values = values.detach().reshape(-1).float()
    if steps.numel() != values.numel():
        raise ValueError(f"{name}: {values.numel()} values but {steps.numel()} step indices")
    metrics: dict[str, float] = {}
    counts: dict[str, int] = {}
    for j in torch.unique(steps).tolist():
        at = steps == j
        key = f"{name}/step_{int(j)}"
        metrics[key] = float(values[at].mean())
        counts[key] = int(at.sum())
    return metrics, counts
