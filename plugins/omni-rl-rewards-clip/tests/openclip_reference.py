"""open_clip's ViT CLIP forward, run straight from an open_clip state dict, for checking the hpsv2 reward.

open_clip itself cannot be installed here (it imports torchvision), so this is the reference: the architecture
as open_clip defines it, built from torch's own ``nn.MultiheadAttention`` (which owns the fused ``in_proj``
layout), ``F.layer_norm`` and exact GELU. It shares no code with the reward's key mapping, so a wrong split,
transpose or pooling there shows up as different numbers here.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import nn


def _norm(x: torch.Tensor, state: Mapping[str, torch.Tensor], name: str) -> torch.Tensor:
    return F.layer_norm(x, x.shape[-1:], state[f"{name}.weight"], state[f"{name}.bias"], eps=1e-5)


def _blocks(
    x: torch.Tensor, state: Mapping[str, torch.Tensor], prefix: str, heads: int, mask: torch.Tensor | None
) -> torch.Tensor:
    width = x.shape[-1]
    layer = 0
    while f"{prefix}.resblocks.{layer}.ln_1.weight" in state:
        block = f"{prefix}.resblocks.{layer}"
        attention = nn.MultiheadAttention(width, heads, batch_first=True)
        attention.load_state_dict(
            {
                "in_proj_weight": state[f"{block}.attn.in_proj_weight"],
                "in_proj_bias": state[f"{block}.attn.in_proj_bias"],
                "out_proj.weight": state[f"{block}.attn.out_proj.weight"],
                "out_proj.bias": state[f"{block}.attn.out_proj.bias"],
            }
        )
        h = _norm(x, state, f"{block}.ln_1")
        x = x + attention(h, h, h, need_weights=False, attn_mask=mask)[0]
        h = _norm(x, state, f"{block}.ln_2")
        h = F.gelu(F.linear(h, state[f"{block}.mlp.c_fc.weight"], state[f"{block}.mlp.c_fc.bias"]))
        x = x + F.linear(h, state[f"{block}.mlp.c_proj.weight"], state[f"{block}.mlp.c_proj.bias"])
        layer += 1
    return x


def encode_image(state: Mapping[str, torch.Tensor], pixels: torch.Tensor, heads: int) -> torch.Tensor:
    """Unnormalised image features: patches + class token, ln_pre, blocks, ln_post on the class token, @ proj."""
    weight = state["visual.conv1.weight"]
    x = F.conv2d(pixels, weight, stride=weight.shape[-1]).flatten(2).transpose(1, 2)
    cls = state["visual.class_embedding"].expand(x.shape[0], 1, -1)
    x = torch.cat([cls, x], dim=1) + state["visual.positional_embedding"]
    x = _blocks(_norm(x, state, "visual.ln_pre"), state, "visual.transformer", heads, None)
    return _norm(x[:, 0], state, "visual.ln_post") @ state["visual.proj"]


def encode_text(state: Mapping[str, torch.Tensor], tokens: torch.Tensor, heads: int) -> torch.Tensor:
    """Unnormalised text features: causal blocks, ln_final, the end-of-text token (the largest id) @ projection."""
    x = state["token_embedding.weight"][tokens] + state["positional_embedding"][: tokens.shape[1]]
    length = tokens.shape[1]
    mask = torch.full((length, length), float("-inf")).triu(1)
    x = _norm(_blocks(x, state, "transformer", heads, mask), state, "ln_final")
    return x[torch.arange(len(tokens)), tokens.argmax(dim=-1)] @ state["text_projection"]


def hps_scores(
    state: Mapping[str, torch.Tensor], pixels: torch.Tensor, tokens: torch.Tensor, heads: int
) -> torch.Tensor:
    """HPSv2's score: the diagonal of normalised image features @ normalised text features."""
    image = F.normalize(encode_image(state, pixels, heads), dim=-1)
    text = F.normalize(encode_text(state, tokens, heads), dim=-1)
    return (image * text).sum(-1)
