"""Advantages to reward probabilities r ∈ [0, 1], the per-sample weight of the positive branch of the
loss (docs/math.md#diffusionnft-loss).

r = clamp((Â / A_max) / 2 + ½, 0, 1) with Â = clip(A, ±A_max), after the reference's ``adv_mode`` transform of
Â (NVlabs/DiffusionNFT, ``scripts/train_nft_sd3.py``): "all" leaves it; "positive_only" / "negative_only" clamp
it to [0, A_max] / [−A_max, 0]; "one_only" replaces it with 1 where Â > 0 and 0 elsewhere; "binary" with
sign(Â). As in the reference, "one_only" and "binary" feed 1 (not A_max) through the same map, so a positive
sample gets r = ½ + 1/(2·A_max) rather than 1: kept, because it is what published runs used.
"""

from __future__ import annotations

import torch
from torch import Tensor


def reward_probability(advantages: Tensor, adv_clip_max: float, mode: str = "all") -> Tensor:
    """Per-sample r (float32, the shape of ``advantages``) for one of the reward modes."""
    clipped = advantages.to(torch.float32).clamp(-adv_clip_max, adv_clip_max)
    if mode == "positive_only":
        clipped = clipped.clamp(0.0, adv_clip_max)
    elif mode == "negative_only":
        clipped = clipped.clamp(-adv_clip_max, 0.0)
    elif mode == "one_only":
        clipped = (clipped > 0).to(torch.float32)
    elif mode == "binary":
        clipped = torch.sign(clipped)
    elif mode != "all":
        raise ValueError(f"unknown reward mode {mode!r}")
    return ((clipped / adv_clip_max) / 2.0 + 0.5).clamp(0.0, 1.0)
