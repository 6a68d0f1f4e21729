"""An open_clip CLIP state dict (OpenAI layout) as the state dict of transformers' CLIPModel.

open_clip's ViT CLIP (the HPSv2 checkpoints' architecture) and transformers' CLIPModel are the same network:
pre-LN transformer blocks with a fused ``in_proj`` (q, k, v stacked, in that order, as torch's
MultiheadAttention stores them) where transformers keeps three projections, class-token pooling with
``ln_post`` and a bias-free projection stored as a (width, dim) matrix where transformers keeps the Linear
weight (dim, width), and a causal text tower pooled at the end-of-text token. The mapping below is one to one:
every tensor of the checkpoint is used exactly once and every parameter of the CLIPModel is filled, or loading
fails, so a checkpoint of another architecture cannot half-load.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

#: buffers open_clip may save that CLIPModel rebuilds itself (the text tower's causal mask)
IGNORED_KEYS = frozenset({"attn_mask", "transformer.attn_mask"})

_BLOCK_RENAMES = {
    "attn.out_proj.weight": "self_attn.out_proj.weight",
    "attn.out_proj.bias": "self_attn.out_proj.bias",
    "ln_1.weight": "layer_norm1.weight",
    "ln_1.bias": "layer_norm1.bias",
    "ln_2.weight": "layer_norm2.weight",
    "ln_2.bias": "layer_norm2.bias",
    "mlp.c_fc.weight": "mlp.fc1.weight",
    "mlp.c_fc.bias": "mlp.fc1.bias",
    "mlp.c_proj.weight": "mlp.fc2.weight",
    "mlp.c_proj.bias": "mlp.fc2.bias",
}

_RENAMES = {
    "visual.conv1.weight": "vision_model.embeddings.patch_embedding.weight",
    "visual.class_embedding": "vision_model.embeddings.class_embedding",
    "visual.positional_embedding": "vision_model.embeddings.position_embedding.weight",
    "visual.ln_pre.weight": "vision_model.pre_layrnorm.weight",
    "visual.ln_pre.bias": "vision_model.pre_layrnorm.bias",
    "visual.ln_post.weight": "vision_model.post_layernorm.weight",
    "visual.ln_post.bias": "vision_model.post_layernorm.bias",
    "token_embedding.weight": "text_model.embeddings.token_embedding.weight",
    "positional_embedding": "text_model.embeddings.position_embedding.weight",
    "ln_final.weight": "text_model.final_layer_norm.weight",
    "ln_final.bias": "text_model.final_layer_norm.bias",
    "logit_scale": "logit_scale",
}

#: (width, dim) matrices applied as ``x @ proj``; a Linear stores the transpose
_TRANSPOSED = {"visual.proj": "visual_projection.weight", "text_projection": "text_projection.weight"}


def unwrap(checkpoint: Any) -> dict[str, torch.Tensor]:
    """The tensors of a saved checkpoint: HPSv2 saves ``{"state_dict": ...}``, DDP training prefixes ``module.``."""
    state = checkpoint.get("state_dict", checkpoint) if isinstance(checkpoint, Mapping) else checkpoint
    if not isinstance(state, Mapping):
        raise ValueError(f"expected a state dict (a mapping of tensors), got {type(checkpoint).__name__}")
    return {key.removeprefix("module."): value for key, value in state.items()}


def _block_prefixes(state: Mapping[str, Any], tower: str) -> list[str]:
    """``visual.transformer.resblocks.0.`` ... (or the text tower's), in layer order."""
    marker = f"{tower}transformer.resblocks."
    indices = {int(key[len(marker) :].split(".", 1)[0]) for key in state if key.startswith(marker)}
    return [f"{marker}{index}." for index in sorted(indices)]


def openclip_to_transformers(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The CLIPModel state dict holding the same weights as the open_clip ``state`` (ValueError on leftovers)."""
    remaining = {key: value for key, value in state.items() if key not in IGNORED_KEYS}
    out: dict[str, torch.Tensor] = {}

    def move(source: str, target: str) -> None:
        if source not in remaining:
            raise ValueError(f"the checkpoint has no {source!r}: not an open_clip ViT CLIP state dict")
        out[target] = remaining.pop(source)

    for source, target in _RENAMES.items():
        move(source, target)
    for source, target in _TRANSPOSED.items():
        move(source, target)
        out[target] = out[target].t().contiguous()
    for tower, hf_tower in (("visual.", "vision_model"), ("", "text_model")):
        for layer, prefix in enumerate(_block_prefixes(remaining, tower)):
            hf_prefix = f"{hf_tower}.encoder.layers.{layer}."
            for kind in ("weight", "bias"):
                move(f"{prefix}attn.in_proj_{kind}", "fused")
                for name, part in zip(("q", "k", "v"), out.pop("fused").chunk(3, dim=0), strict=True):
                    out[f"{hf_prefix}self_attn.{name}_proj.{kind}"] = part.contiguous()
            for source, target in _BLOCK_RENAMES.items():
                move(prefix + source, hf_prefix + target)
    if remaining:
        raise ValueError(f"the checkpoint has tensors a CLIPModel has no place for: {sorted(remaining)[:8]}")
    return out
