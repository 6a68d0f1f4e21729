"""Qwen-Image's latent layout: 2x2 packing into tokens, and the per-token true-CFG combination
(docs/math.md#classifier-free-guidance).

The 2x2 packing itself is :mod:`omni_rl_pipelines.packed_latents` (FLUX packs the same way). omni-rl keeps latents as
(B, C, h, w) (what samplers, trajectories and rewards see, and what the VAE takes with a
frame axis added); the transformer takes and returns packed tokens (B, h/2 * w/2, 4C), each token the 2x2 patch's
channels in QwenImagePipeline._pack_latents order. Packing is a permutation, so an Euler or SDE step and a
per-sample mean log-prob are the same in either layout; the true-CFG norm rescaling is not (it is per token), so
it happens on packed tokens.
"""

from __future__ import annotations

import torch
from omni_rl_pipelines.packed_latents import pack, unpack

__all__ = ["pack", "true_cfg", "unpack"]


def true_cfg(positive: torch.Tensor, negative: torch.Tensor, scale: float) -> torch.Tensor:
    """QwenImagePipeline's true CFG on packed velocities: comb = neg + s (pos - neg), rescaled per token to the
    norm of the positive prediction, comb * ||pos|| / ||comb|| along the channel (last) dimension."""
    combined = negative + scale * (positive - negative)
    positive_norm = torch.norm(positive, dim=-1, keepdim=True)
    combined_norm = torch.norm(combined, dim=-1, keepdim=True)
    return combined * (positive_norm / combined_norm)
