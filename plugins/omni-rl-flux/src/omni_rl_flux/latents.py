"""FLUX's latent layout: 2x2 packing into tokens and the rotary position ids of image and text tokens.

omni-rl keeps latents as (B, C, h, w) (what samplers, trajectories and the VAE see); the transformer takes and
returns packed tokens (B, h/2 * w/2, 4C) in ``FluxPipeline._pack_latents`` order. Packing is a permutation, so an
Euler or SDE step and a per-sample mean log-prob are the same in either layout, and FLUX's CFG is elementwise.
"""

from __future__ import annotations

import torch
from omni_rl_pipelines.packed_latents import pack, unpack

__all__ = ["image_ids", "pack", "text_ids", "unpack"]


def image_ids(height: int, width: int, *, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """(h/2 * w/2, 3) position ids of the packed image tokens (0, row, column), as
    ``FluxPipeline._prepare_latent_image_ids`` for latents of ``height`` x ``width``."""
    rows, cols = height // 2, width // 2
    ids = torch.zeros(rows, cols, 3)
    ids[..., 1] = torch.arange(rows)[:, None]
    ids[..., 2] = torch.arange(cols)[None, :]
    return ids.reshape(rows * cols, 3).to(device=device, dtype=dtype)


def text_ids(length: int, *, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """(length, 3) zeros: FLUX gives every text token the same position, as ``FluxPipeline.encode_prompt``."""
    return torch.zeros(length, 3, device=device, dtype=dtype)
