"""AWM's time weightings w(ℓ, t): the per-sample quantity whose negative plays the log-prob (docs/math.md#awm-loss).

As the reference trainer (``compute_log_prob_awm`` in scxue/advantage_weighted_matching) defines them, with
ℓ = mean_dims (v_θ(x_t, t) − (ε − x₀))²:

- ``uniform``: w = ℓ
- ``t``: w = t·ℓ
- ``t_squared``: w = t²·ℓ
- ``ghuber``: w = (t / p)·((ℓ + eps)^p − eps^p), p = 0.25 and eps = 1e-10 in the reference. It grows like ℓ^p,
  so a few badly fitted samples cannot dominate the batch, and subtracting eps^p makes w = 0 at ℓ = 0.

The reference evaluates these in float64; this plugin keeps float32 (the project's standard). The ratio is
unaffected where it matters: on-policy both log-probs come from identical float32 computations, so ρ = 1
exactly, and eps only matters for ℓ within ~1e-7 relative of zero, where it keeps the gradient finite.
"""

from __future__ import annotations

import torch
from torch import Tensor

from omni_rl_awm.config import AWMLossConfig


def time_weighted_loss(ell: Tensor, t: Tensor, config: AWMLossConfig) -> Tensor:
    """w(ℓ, t) per sample: ``ell`` and ``t`` of shape (B,), float32 out (so −w is AWM's log-prob)."""
    ell = ell.to(torch.float32)
    t = t.to(device=ell.device, dtype=torch.float32)
    if config.weighting == "uniform":
        return ell
    if config.weighting == "t":
        return t * ell
    if config.weighting == "t_squared":
        return t * t * ell
    if config.weighting == "ghuber":
        p, eps = config.ghuber_power, config.ghuber_eps
        return (t / p) * ((ell + eps).pow(p) - eps**p)
    raise ValueError(f"awm: unknown weighting {config.weighting!r}")  # pragma: no cover - validated in config
