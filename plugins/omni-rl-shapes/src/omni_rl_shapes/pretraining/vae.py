"""Pretraining step 1: make the tiny pipeline's random VAE a real autoencoder of shapes images.

A random VAE decodes anything to noise, so the transformer would have nothing to learn. Rather than hand-build
a near-identity VAE (SD3's GroupNorm + SiLU layers make that brittle), the builder's VAE is trained briefly on
rendered scenes: reconstruction MSE plus a small KL term (which keeps the latent space smooth enough for the
transformer to model, and the decoder tolerant of latents that are slightly off), on posterior samples, as
a VAE is trained. Afterwards its ``scaling_factor`` and ``shift_factor`` are recalibrated the way SD3's were:
latents ``(z - shift) * scale`` have zero mean and unit standard deviation on the data.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import numpy as np


@attrs.frozen(kw_only=True)
class VAETraining:
    steps: int = 400
    batch_size: int = 32
    lr: float = 1e-3
    #: weight of the KL term (summed over latent elements) against the per-pixel mean squared error
    kl_weight: float = 1e-6
    grad_clip: float = 1.0


def to_tensor(images: np.ndarray) -> Any:
    """uint8 (N, H, W, 3) to float (N, 3, H, W) in [-1, 1], the VAE's input range; clips (N, F, H, W, 3) to
    (N, 3, F, H, W), a video VAE's layout."""
    import torch

    x = torch.from_numpy(np.ascontiguousarray(images))
    channels_first = (0, 3, 1, 2) if x.ndim == 4 else (0, 4, 1, 2, 3)
    return x.permute(*channels_first).float() / 127.5 - 1.0


def from_tensor(x: Any) -> np.ndarray:
    """The inverse of :func:`to_tensor`: a decoded batch in [-1, 1] back to uint8 images or clips."""
    channels_last = (0, 2, 3, 1) if x.ndim == 4 else (0, 2, 3, 4, 1)
    return ((x.clamp(-1, 1) + 1) * 127.5).round().byte().permute(*channels_last).numpy()


def train_vae(
    vae: Any,
    draw_batch: Callable[[int], np.ndarray],
    settings: VAETraining,
    log: Callable[[str], None] = print,
) -> list[float]:
    """Train ``vae`` in place on batches from ``draw_batch(n)`` (uint8 images); returns the MSE per step."""
    import torch

    vae.train().requires_grad_(True)
    optimizer = torch.optim.AdamW(vae.parameters(), lr=settings.lr, weight_decay=0.0)
    losses = []
    for step in range(settings.steps):
        x = to_tensor(draw_batch(settings.batch_size))
        posterior = vae.encode(x).latent_dist
        reconstruction = vae.decode(posterior.sample()).sample
        mse = (reconstruction - x).pow(2).mean()
        loss = mse + settings.kl_weight * posterior.kl().mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(vae.parameters(), settings.grad_clip)
        optimizer.step()
        losses.append(mse.item())
        if step % 100 == 0 or step == settings.steps - 1:
            log(f"vae step {step:4d}  mse {losses[-1]:.5f}")
    vae.eval().requires_grad_(False)
    return losses


def calibrate_latents(vae: Any, images: np.ndarray) -> tuple[float, float]:
    """Set the VAE's ``shift_factor`` / ``scaling_factor`` so data latents are standardised; returns them."""
    import torch

    with torch.no_grad():
        z = vae.encode(to_tensor(images)).latent_dist.mean
    shift = float(z.mean())
    scale = float(1.0 / z.std())
    vae.register_to_config(shift_factor=shift, scaling_factor=scale)
    return shift, scale


def encode(vae: Any, images: np.ndarray, batch_size: int = 64) -> Any:
    """Model-space latents ``(mean - shift) * scale`` (float32, (N, C, h, w)) of uint8 images."""
    import torch

    shift, scale = vae.config.shift_factor, vae.config.scaling_factor
    parts = []
    with torch.no_grad():
        for start in range(0, len(images), batch_size):
            z = vae.encode(to_tensor(images[start : start + batch_size])).latent_dist.mean
            parts.append((z - shift) * scale)
    return torch.cat(parts)
