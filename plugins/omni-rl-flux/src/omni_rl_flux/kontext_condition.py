"""FLUX.1-Kontext's condition image: how it is sized, VAE-encoded and positioned, as ``FluxKontextPipeline`` does.

``FluxKontextPipeline.__call__`` (diffusers 0.42) takes the source image's size floored to multiples of 2 x the VAE
factor (its image processor's ``get_default_height_width``), snaps it to a preferred ~1 MP resolution when
``_auto_resize`` (the default), resizes and normalises it with its ``VaeImageProcessor`` (Lanczos, to [-1, 1]),
VAE-encodes it taking the posterior's mode (``retrieve_latents(..., sample_mode="argmax")``), normalises the
latents as ``(z - shift_factor) * scaling_factor``, packs them 2x2 into tokens like the target's, and gives them the
target's position ids with coordinate 0 set to 1. Only the sizing differs here, by option
(:mod:`omni_rl_flux.kontext_config`); with the source within ``condition_max_area`` the tokens are the pipeline's
with ``_auto_resize=False``, bit for bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from omni_rl.errors import RuntimeFailure
from omni_rl_flux.latents import image_ids, pack


def condition_size(height: int, width: int, *, max_area: int, multiple: int, resize: str) -> tuple[int, int]:
    """(height, width) in pixels of the VAE copy of a ``height`` x ``width`` source.

    As the pipeline: the size floored to ``multiple`` (2 x the VAE factor), then either the nearest preferred
    Kontext resolution by aspect ratio (``resize = "kontext_resolutions"``, the pipeline's ``_auto_resize``) or,
    above ``max_area`` pixels, the area rule ``__call__`` applies to its output size (``round(sqrt(area x
    aspect))`` wide), then floored to ``multiple`` again. A side below ``multiple`` becomes one ``multiple``: the
    smallest condition the transformer takes (the pipeline would fail on it)."""
    height = max(multiple, height // multiple * multiple)
    width = max(multiple, width // multiple * multiple)
    aspect = width / height
    if resize == "kontext_resolutions":
        from diffusers.pipelines.flux.pipeline_flux_kontext import PREFERRED_KONTEXT_RESOLUTIONS

        _, width, height = min((abs(aspect - w / h), w, h) for w, h in PREFERRED_KONTEXT_RESOLUTIONS)
    elif height * width > max_area:
        width = round((max_area * aspect) ** 0.5)
        height = round((max_area / aspect) ** 0.5)
    return max(multiple, height // multiple * multiple), max(multiple, width // multiple * multiple)


def check_source(image: Any, where: str) -> np.ndarray:
    """``image`` as a uint8 (H, W, 3) array, or a RuntimeFailure naming ``where`` (the prompt and position)."""
    array = np.asarray(image)
    if array.dtype != np.uint8 or array.ndim != 3 or array.shape[-1] != 3:
        raise RuntimeFailure(
            f"{where}: a condition image must be uint8 (H, W, 3), got {array.dtype} {tuple(array.shape)}",
            hint="pass condition images as the prompt source loads them (RGB uint8 arrays)",
        )
    return array


@torch.no_grad()
def encode_condition(
    pipeline: Any, vae: Any, image: np.ndarray, size: tuple[int, int], *, device: torch.device
) -> torch.Tensor:
    """The packed condition tokens (1, h/2 * w/2, 4C) of one uint8 (H, W, 3) source at ``size`` (pixels), in the
    VAE's dtype on ``device``: the pipeline's resize and preprocess (on a PIL image, as a user's image reaches
    ``__call__``), the posterior's mode, ``(z - shift) * scaling``, 2x2 packing."""
    from diffusers.pipelines.flux.pipeline_flux_kontext import retrieve_latents
    from PIL import Image

    height, width = size
    processor = pipeline.image_processor
    resized = processor.resize(Image.fromarray(image), height, width)
    pixels = processor.preprocess(resized, height, width).to(device=device, dtype=vae.dtype)
    latents = retrieve_latents(vae.encode(pixels), sample_mode="argmax")
    latents = (latents - vae.config.shift_factor) * vae.config.scaling_factor
    return pack(latents)


def condition_ids(height: int, width: int, *, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """(h/2 * w/2, 3) position ids of the condition tokens of ``height`` x ``width`` latents: the target's
    (``_prepare_latent_image_ids``) with coordinate 0 set to 1, as ``FluxKontextPipeline.prepare_latents``."""
    ids = image_ids(height, width, device=device, dtype=dtype).clone()
    ids[:, 0] = 1
    return ids
