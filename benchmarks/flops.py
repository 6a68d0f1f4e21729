"""Model FLOPs of an MMDiT transformer forward, counted from its config, and model FLOPs utilisation (MFU).

Per sample and forward, with N the transformer's parameters (without LoRA), T = image tokens + text tokens of the
joint attention, L the layers, d the attention width (heads x head dim):

    F_forward = 2·N·T  +  4·L·T²·d  (+ 4·T_img²·d for each dual-attention layer, SD3.5's extra image-only attention)

2·N·T counts every weight's multiply-add once per token (an upper bound: the embedders and the final layer see
fewer tokens); 4·L·T²·d counts the two attention matmuls (Q·Kᵀ and P·V, 2·T²·d each). The rollout's
transformer FLOPs are F_forward × rows × steps (rows = 2 per sample with CFG, which the update applies too);
the update's are 3·F_forward per row and trained step (forward + backward through the activations; LoRA's weight
gradients are negligible), plus F_forward per row and step for a recomputed old log-prob. Text encoders and the
VAE are not counted, so MFU is a floor. MFU = counted FLOPs / seconds / the GPU's dense bf16 peak.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: dense bf16 tensor-core peaks (FLOP/s) of the GPUs this project measures on, from NVIDIA's datasheets (SXM)
PEAK_BF16 = {"H100": 989.4e12, "H200": 989.4e12, "A100": 312e12}


def forward_flops(
    params: int, layers: int, width: int, image_tokens: int, text_tokens: int, dual_layers: int = 0
) -> float:
    """F_forward of one sample (module docstring)."""
    tokens = image_tokens + text_tokens
    return 2.0 * params * tokens + 4.0 * layers * tokens**2 * width + 4.0 * dual_layers * image_tokens**2 * width


def sd3_forward_flops(config: Mapping[str, Any], params: int, height: int, text_tokens: int) -> float:
    """F_forward of an SD3Transformer2DModel config at ``height`` px (square, VAE factor 8)."""
    latent = height // 8
    image_tokens = (latent // int(config["patch_size"])) ** 2
    width = int(config["num_attention_heads"]) * int(config["attention_head_dim"])
    dual = len(config.get("dual_attention_layers") or ())
    return forward_flops(params, int(config["num_layers"]), width, image_tokens, text_tokens, dual)


def peak_flops(device_name: str) -> float | None:
    """The dense bf16 peak of a GPU named like ``NVIDIA H200``, or None when unknown."""
    for key, value in PEAK_BF16.items():
        if key in device_name:
            return value
    return None
