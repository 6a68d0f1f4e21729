"""Shape and dtype plumbing shared by the samplers.

Every sampler computes in float32: bf16 overflows in the SDE mean and its rounding would break the
on-policy ratio check (docs/math.md#on-policy-ratio), so inputs are upcast here before any arithmetic.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

#: log sqrt(2π) rounded through float32 exactly as the reference samplers compute it (a float32 tensor op), so the
#: constant term of :func:`gaussian_log_prob` matches them bit for bit
_LOG_SQRT_2PI = float(torch.log(torch.sqrt(2 * torch.as_tensor(math.pi, dtype=torch.float32))))


def as_f32(t: Tensor) -> Tensor:
    """``t`` in float32 (a no-op for float32 tensors, so the autograd graph is kept)."""
    return t if t.dtype == torch.float32 else t.to(torch.float32)


def per_sample(t: Tensor, like: Tensor) -> Tensor:
    """A per-sample value ((B,), (B, 1, …, 1) or a scalar) as float32 of shape (B|1, 1, …, 1).

    Sigmas arrive per sample because a batch may mix schedule steps (the window differs per training step,
    and the update re-scores any stored step); broadcasting them against ``like`` keeps one code path.
    """
    t = as_f32(t.to(like.device))
    if t.numel() not in (1, like.shape[0]):
        raise ValueError(f"per-sample sigmas must have shape ({like.shape[0]},) or be scalars, got {tuple(t.shape)}")
    return t.reshape(-1, *([1] * (like.ndim - 1)))


def flat_per_sample(t: Tensor, batch: int) -> Tensor:
    """A broadcast per-sample tensor of shape (B|1, 1, …, 1) back to shape (B,)."""
    return t.reshape(-1).expand(batch) if t.numel() == 1 else t.reshape(batch)


def mean_over_sample(t: Tensor) -> Tensor:
    """Mean over every non-batch dim: omni-rl's per-sample log-prob is a mean, not a sum (docs/math.md#conventions)."""
    return t.mean(dim=tuple(range(1, t.ndim))) if t.ndim > 1 else t


def next_sample(mean: Tensor, scale: Tensor | None, noise: Tensor | None, prev_sample: Tensor | None) -> Tensor:
    """The step's x': the stored ``prev_sample`` (detached, re-scored) or ``mean + scale * noise``.

    ``noise`` comes from the caller, who draws it with per-sample generators so a sample's image depends
    only on its seed; without it standard normal noise is drawn from the global generator. ``scale=None``
    marks a deterministic step: x' = mean and no noise is drawn (the caller's RNG state is untouched).
    """
    if prev_sample is not None:
        return as_f32(prev_sample.detach())
    if scale is None:
        return mean
    if noise is None:
        noise = torch.randn_like(mean)
    return mean + scale * as_f32(noise)


def gaussian_log_prob(sample: Tensor, mean: Tensor, std: Tensor) -> Tensor:
    """The per-sample log-prob of x' ~ N(μ, std²): mean over every non-batch dim of the exact Gaussian log-density
    -(x' - μ)²/(2 std²) - log std - log sqrt(2π), with x' detached (``flow_sde`` and ``dance_sde``;
    docs/math.md#flow-sde-sampler)."""
    log_density = -((sample.detach() - mean) ** 2) / (2 * std**2) - torch.log(std) - _LOG_SQRT_2PI
    return mean_over_sample(log_density)
