"""2x2-packed latents, the layout FLUX and Qwen-Image transformers take, their pipelines' sigma schedule, and the
model base of both (:class:`PackedPipelineModel`).

omni-rl keeps latents as (B, C, h, w) (what samplers, trajectories and the VAE see); those transformers take and
return packed tokens (B, h/2 * w/2, 4C), each token one 2x2 patch's channels in the order of their pipelines'
``_pack_latents``. Packing is a permutation, so an Euler or SDE step and a per-sample mean log-prob are the same in
either layout. SD3 and Wan do not pack (their transformers patchify inside).
"""

from __future__ import annotations

from typing import Any

import torch

from omni_rl.errors import ConfigError
from omni_rl_pipelines.pipeline_model import PipelineModel


def pack(latents: torch.Tensor) -> torch.Tensor:
    """(B, C, h, w) -> (B, h/2 * w/2, 4C), as ``FluxPipeline._pack_latents`` / ``QwenImagePipeline._pack_latents``."""
    b, c, h, w = latents.shape
    patches = latents.reshape(b, c, h // 2, 2, w // 2, 2).permute(0, 2, 4, 1, 3, 5)
    return patches.reshape(b, (h // 2) * (w // 2), c * 4)


def unpack(tokens: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """(B, h/2 * w/2, 4C) -> (B, C, h, w) for latents of ``height`` x ``width``: the inverse of :func:`pack`."""
    b, _, channels = tokens.shape
    c = channels // 4
    patches = tokens.reshape(b, height // 2, width // 2, c, 2, 2).permute(0, 3, 1, 4, 2, 5)
    return patches.reshape(b, c, height, width)


def packed_sigma_schedule(
    scheduler: Any, num_steps: int, latent_height: int, latent_width: int, *, device: torch.device
) -> torch.Tensor:
    """FluxPipeline's and QwenImagePipeline's sigmas: linspace(1, 1/n, n) through a private copy of ``scheduler``
    with mu = calculate_shift(image tokens) (used when the scheduler has ``use_dynamic_shifting``; a fixed shift
    ignores it), then the trailing 0; float32, shape (n + 1,), on ``device``."""
    import numpy as np
    from diffusers.pipelines.flux.pipeline_flux import calculate_shift  # the same function as Qwen-Image's

    scheduler = type(scheduler).from_config(scheduler.config)  # a private copy: set_timesteps mutates state
    config = scheduler.config
    mu = calculate_shift(
        (latent_height // 2) * (latent_width // 2),
        config.get("base_image_seq_len", 256),
        config.get("max_image_seq_len", 4096),
        config.get("base_shift", 0.5),
        config.get("max_shift", 1.15),
    )
    if config.get("use_flow_sigmas", False):
        scheduler.set_timesteps(num_steps, device="cpu", mu=mu)
    else:
        scheduler.set_timesteps(sigmas=np.linspace(1.0, 1 / num_steps, num_steps), device="cpu", mu=mu)
    return scheduler.sigmas.to(device=device, dtype=torch.float32)


class PackedPipelineModel(PipelineModel):
    """A :class:`PipelineModel` whose transformer takes 2x2-packed tokens (FLUX, Qwen-Image): image sizes are whole
    2x2 patches of latents, and the sigma schedule is their pipelines' (:func:`packed_sigma_schedule`)."""

    #: image size multiple in latent pixels beyond the VAE's: the 2x2 packing
    patch_size = 2

    def sigma_schedule(self, num_steps: int, height: int, width: int) -> torch.Tensor:
        """The pipeline's sigmas: linspace(1, 1/n, n) through the scheduler with mu = calculate_shift(image tokens)
        (used when the scheduler has ``use_dynamic_shifting``: FLUX.1-dev's shift, Qwen-Image's exponential shift
        and terminal stretch; FLUX.1-schnell's fixed shift 1 ignores it), then 0; float32, shape (n + 1,), on the
        model's device."""
        if num_steps < 1:
            raise ConfigError(f"num_steps must be >= 1, got {num_steps}", hint="set [rollout] steps >= 1")
        _, h, w = self.latent_shape(height, width)
        return packed_sigma_schedule(self.pipeline.scheduler, num_steps, h, w, device=self.device)

    def _patch_note(self) -> str:
        return "2x2 latent packing"
