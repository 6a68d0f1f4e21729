"""The Monte-Carlo ELBO of a finished sample, from the sample alone (docs/math.md#elbo-likelihood).

For a clean x₀ and K pairs (t_k, ε_k): x_{t_k} = (1 − t_k)·x₀ + t_k·ε_k, ℓ_k = mean_dims (v(x_{t_k}, t_k) −
(ε_k − x₀))², and ELBO(x₀) ≈ −(1/K) Σ_k λ_k·w(ℓ_k, t_k) up to a constant that does not depend on the policy. Up
to that constant and a positive scale it is the flow-matching form of the diffusion ELBO, so it plays
log p_θ(x₀) in a policy gradient without the sampler's trajectory (any sampler, ODE included, can roll out).

The draws reuse AWM's (:func:`omni_rl_awm.timesteps.draw_time_and_noise`): draw k of a sample takes one uniform U
and then ε from the sample's generator, in order, so a sample's K draws come from its own stream and do not depend
on micro-batching or on the number of workers. With group-shared draws every sample of a prompt group takes the
draws of the group's first sample in the micro-batch (whole groups travel together: ``batch_unit = "group"``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from omni_rl_awm.config import AWMLossConfig
from omni_rl_awm.elbo_config import ELBOOptions
from omni_rl_awm.timesteps import draw_time_and_noise
from omni_rl_awm.weighting import time_weighted_loss


def draw_options(config: ELBOOptions) -> AWMLossConfig:
    """AWM's option record for the draws and weightings this ELBO shares with it (no EMA, no KL)."""
    return AWMLossConfig(
        weighting=config.weighting,
        ghuber_power=config.ghuber_power,
        timesteps=config.draws,
        time_sampling=config.time_sampling,
        time_range=config.time_range,
        time_shift=config.time_shift,
        schedule_steps=config.schedule_steps,
        schedule_skip_first=True,
        schedule_fraction=1.0,
    )


def group_first_rows(group_ids: Tensor) -> Tensor:
    """For each row, the row of the first sample of its group in this micro-batch, shape (B,)."""
    ids = group_ids.reshape(-1).tolist()
    first: dict[int, int] = {}
    return torch.as_tensor([first.setdefault(int(g), i) for i, g in enumerate(ids)], dtype=torch.long)


def draw_pairs(
    generators: list[Any],
    latent_shape: tuple[int, ...],
    *,
    draws: int,
    options: AWMLossConfig,
    stratified: bool,
    device: Any,
    sigma_schedule: Any = None,
    share_rows: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """(t of shape (B, K), ε of shape (B, K, *latent_shape)) for B generators.

    ``share_rows`` (B,): row b takes row ``share_rows[b]``'s draws (group-shared pairs); only those rows draw.
    """
    batch = len(generators)
    owners = list(range(batch)) if share_rows is None else sorted(set(share_rows.tolist()))
    times, noises = [], []
    for k in range(draws):
        t, noise = draw_time_and_noise(
            [generators[i] for i in owners],
            latent_shape,
            index=k if stratified else 0,
            count=draws if stratified else 1,
            config=options,
            device=device,
            sigma_schedule=sigma_schedule,
        )
        times.append(t)
        noises.append(noise)
    t = torch.stack(times, dim=1)
    noise = torch.stack(noises, dim=1)
    if share_rows is not None:
        position = {row: j for j, row in enumerate(owners)}
        pick = torch.as_tensor([position[int(r)] for r in share_rows.tolist()], dtype=torch.long, device=t.device)
        t, noise = t[pick], noise[pick]
    return t, noise


def noised(x0: Tensor, t: Tensor, noise: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(x_t, t, target ε − x₀, rows) flattened to B·K rows (sample-major), and each row's sample index."""
    batch, draws = t.shape
    x0_rep = x0.unsqueeze(1).expand(batch, draws, *x0.shape[1:])
    t_b = t.reshape(batch, draws, *([1] * (x0.ndim - 1)))
    x_t = (1.0 - t_b) * x0_rep + t_b * noise
    target = noise - x0_rep
    rows = torch.arange(batch, device=x0.device).repeat_interleave(draws)
    flat = batch * draws
    return x_t.reshape(flat, *x0.shape[1:]), t.reshape(flat), target.reshape(flat, *x0.shape[1:]), rows


def matching_errors(velocity: Tensor, target: Tensor, batch: int) -> Tensor:
    """ℓ = mean_dims (v − target)² of B·K rows, as (B, K) float32."""
    diff = velocity.to(torch.float32) - target
    return (diff * diff).reshape(diff.shape[0], -1).mean(dim=1).reshape(batch, -1)


def elbo_from_errors(ell: Tensor, t: Tensor, options: AWMLossConfig, scale: Tensor | None = None) -> Tensor:
    """ELBO ≈ −mean_k λ_k·w(ℓ_k, t_k), shape (B,); ``scale`` is λ (B, K), detached, or None for 1."""
    batch, draws = ell.shape
    weighted = time_weighted_loss(ell.reshape(-1), t.reshape(-1), options).reshape(batch, draws)
    if scale is not None:
        weighted = weighted * scale
    return -weighted.mean(dim=1)


def group_draw_scale(ell: Tensor, group_ids: Tensor, eps: float = 1e-8) -> Tensor:
    """λ (B, K) = 1 / (mean over the sample's group of ℓ at draw k), detached: the adaptive loss weighting."""
    ell = ell.detach()
    _, inverse = torch.unique(group_ids.reshape(-1).to(ell.device), return_inverse=True)
    groups = int(inverse.max()) + 1 if inverse.numel() else 0
    sums = torch.zeros(groups, ell.shape[1], dtype=ell.dtype, device=ell.device).index_add_(0, inverse, ell)
    counts = torch.bincount(inverse, minlength=groups).to(ell.dtype).unsqueeze(1)
    return 1.0 / ((sums / counts)[inverse] + eps)
