"""ZImagePipeline's sigma schedule and its timestep convention.

The pipeline's sigmas are ``get_default_z_image_sigmas(n)`` (linspace(1, 1/n, n) in float32) through the scheduler
with mu = calculate_shift(image tokens): the published checkpoints use a fixed shift (Z-Image-Turbo's scheduler
config: ``shift = 3.0``, ``use_dynamic_shifting = false``, so mu is ignored), a scheduler with dynamic shifting uses
mu. The transformer's timestep is ``(1000 - t) / 1000`` for the scheduler's t = sigma x 1000 (float32): Z-Image
counts time from noise (0) to data (1), the reverse of sigma.
"""

from __future__ import annotations

from typing import Any

import torch


def z_image_sigmas(scheduler: Any, num_steps: int, latent_height: int, latent_width: int) -> torch.Tensor:
    """The n + 1 sigmas (the trailing 0 included) ZImagePipeline steps through, float32 on the CPU."""
    from diffusers.pipelines.z_image.pipeline_z_image import calculate_shift, get_default_z_image_sigmas

    scheduler = type(scheduler).from_config(scheduler.config)  # a private copy: set_timesteps mutates state
    config = scheduler.config
    mu = calculate_shift(
        (latent_height // 2) * (latent_width // 2),
        config.get("base_image_seq_len", 256),
        config.get("max_image_seq_len", 4096),
        config.get("base_shift", 0.5),
        config.get("max_shift", 1.15),
    )
    scheduler.set_timesteps(sigmas=get_default_z_image_sigmas(num_steps), device="cpu", mu=mu)
    return scheduler.sigmas.to(dtype=torch.float32)


def model_time(sigma: torch.Tensor, num_train_timesteps: int) -> torch.Tensor:
    """The transformer's t of each sample: (T - sigma x T) / T in float32, as the pipeline computes it from the
    scheduler's timestep (also the value ``cfg_truncation`` is compared with)."""
    t = sigma.float() * num_train_timesteps
    return (num_train_timesteps - t) / num_train_timesteps
