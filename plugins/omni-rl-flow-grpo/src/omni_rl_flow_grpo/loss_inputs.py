"""Shape and dtype plumbing of the trajectory losses (``flow_grpo`` here; ``grpo_guard`` and ``flow_dppo`` in their
own plugins): every per-sample input becomes float32 of shape (B,) before any arithmetic, and a missing log-prob,
old view or sampler scale is reported with the loss's name and the likely cause, in the same words by each loss."""

from __future__ import annotations

import torch
from torch import Tensor

from omni_rl.batch import SamplerStep


def f32(t: Tensor) -> Tensor:
    """``t`` in float32 (a no-op for float32 tensors, so the autograd graph is kept)."""
    return t if t.dtype == torch.float32 else t.to(torch.float32)


def per_sample(t: Tensor, batch: int, loss_name: str) -> Tensor:
    """A per-sample value given as (B,), (B, 1, …, 1) or a scalar, as float32 of shape (B,)."""
    t = f32(torch.as_tensor(t))
    if t.numel() == 1:
        return t.reshape(1).expand(batch)
    if t.numel() != batch:
        raise ValueError(f"{loss_name}: expected one value per sample ({batch}), got shape {tuple(t.shape)}")
    return t.reshape(batch)


def log_prob_of(step: SamplerStep, loss_name: str) -> Tensor:
    """The step's per-sample log-prob as float32, or a clear error when the sampler gave none."""
    if step.log_prob is None:
        raise ValueError(
            f"{loss_name} needs per-step log-probs, but the sampler returned none (a deterministic "
            "sampler such as ode, or a noise level of 0)"
        )
    return f32(step.log_prob)


def require_old(old: SamplerStep | None, loss_name: str, *, needed_for: str) -> SamplerStep:
    """The ``old`` view's step, or a clear error naming what needs it (``needed_for``, e.g. "RatioNorm needs the old
    policy's mean μ_old") when the update did not evaluate it: a loss that lists ``"old"`` in its requirements always
    gets it, so this only fires for an update engine that ignores them."""
    if old is None:
        raise ValueError(
            f"{loss_name}: no old view was given ({needed_for}); the update must evaluate the views in "
            "loss.requirements.views"
        )
    return old


def require_scale(step: SamplerStep, batch: int, loss_name: str, *, needed_for: str, fix: str) -> Tensor:
    """The step's per-sample std of x' (``SamplerStep.scale``) as float32 (B,), or a clear error saying what needs
    it (``needed_for``) and which sampler to use instead (``fix``): deterministic and non-Gaussian samplers report
    none."""
    if step.scale is None:
        raise ValueError(
            f"{loss_name}: the sampler does not report the std of x' (SamplerStep.scale), which {needed_for}; {fix}"
        )
    return per_sample(step.scale, batch, loss_name)


def weighted(terms: Tensor, weights: Tensor | None, loss_name: str) -> Tensor:
    """``terms`` (B,) times the rollout correction's detached per-sample weights (``TrajectoryLossInputs.weights``);
    ``terms`` itself when there are none, so an uncorrected loss computes exactly what it did before."""
    if weights is None:
        return terms
    return terms * per_sample(weights, terms.shape[0], loss_name).detach()
