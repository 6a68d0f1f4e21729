"""FLUX.2's latent layout: patchified, batch-normalised latents, their tokens, the 4-axis position ids and the
pipeline's sigma schedule.

The model's latents are the ones ``Flux2KleinPipeline`` denoises: the VAE's 2x2 patches stacked on channels (B, 4C,
h/2, w/2) and normalised by the VAE's batch-norm running statistics; the pipeline draws its noise in that shape. So
the transformer's tokens are a plain flattening (B, h/2 * w/2, 4C) (``_pack_latents``), and omni-rl keeps the
(B, 4C, h/2, w/2) layout the samplers and the VAE side see.
"""

from __future__ import annotations

from typing import Any

import torch


def tokens(latents: torch.Tensor) -> torch.Tensor:
    """(B, C, h, w) -> (B, h * w, C), as ``Flux2KleinPipeline._pack_latents``."""
    b, c, h, w = latents.shape
    return latents.reshape(b, c, h * w).permute(0, 2, 1)


def untokens(x: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """(B, h * w, C) -> (B, C, h, w): the inverse of :func:`tokens` (``_unpack_latents_with_ids`` for the
    target's row-major ids)."""
    b, _, c = x.shape
    return x.permute(0, 2, 1).reshape(b, c, height, width)


def image_ids(height: int, width: int, *, device: torch.device) -> torch.Tensor:
    """(h * w, 4) ids (T, H, W, L) = (0, row, column, 0) of the target's tokens, as ``_prepare_latent_ids``."""
    return torch.cartesian_prod(torch.arange(1), torch.arange(height), torch.arange(width), torch.arange(1)).to(device)


def text_ids(length: int, *, device: torch.device) -> torch.Tensor:
    """(length, 4) ids (0, 0, 0, token index), as ``_prepare_text_ids``."""
    return torch.cartesian_prod(torch.arange(1), torch.arange(1), torch.arange(1), torch.arange(length)).to(device)


def batch_norm_stats(vae: Any, *, device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean, std) shaped (1, 4C, 1, 1) of the VAE's batch norm over patchified latents, as the pipeline builds
    them: running mean and sqrt(running var + batch_norm_eps)."""
    mean = vae.bn.running_mean.view(1, -1, 1, 1).to(device, dtype)
    std = torch.sqrt(vae.bn.running_var.view(1, -1, 1, 1) + vae.config.batch_norm_eps).to(device, dtype)
    return mean, std


def sigma_schedule(scheduler: Any, num_steps: int, image_tokens: int, *, device: torch.device) -> torch.Tensor:
    """Flux2KleinPipeline's sigmas: linspace(1, 1/n, n) (none with ``use_flow_sigmas``) through a private copy of
    ``scheduler`` with mu = ``compute_empirical_mu(image tokens, n)`` (FLUX.2's fit of the shift to resolution and
    step count), then the trailing 0; float32, shape (n + 1,)."""
    import numpy as np
    from diffusers.pipelines.flux2.pipeline_flux2_klein import compute_empirical_mu

    scheduler = type(scheduler).from_config(scheduler.config)  # set_timesteps mutates state
    mu = compute_empirical_mu(image_seq_len=image_tokens, num_steps=num_steps)
    if scheduler.config.get("use_flow_sigmas", False):
        scheduler.set_timesteps(num_steps, device="cpu", mu=mu)
    else:
        scheduler.set_timesteps(sigmas=np.linspace(1.0, 1 / num_steps, num_steps), device="cpu", mu=mu)
    return scheduler.sigmas.to(device=device, dtype=torch.float32)
