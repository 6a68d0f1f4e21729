"""The published dimensions of the real models benchmarks/real_sizes.py builds with random weights.

Each transformer config is the one in the model's ``transformer/config.json`` on the hub (stabilityai/
stable-diffusion-3.5-large, black-forest-labs/FLUX.1-dev, Qwen/Qwen-Image); the text encoders are the ones the
pipelines load (CLIP-L, OpenCLIP bigG and T5-XXL's encoder for SD3.5 and FLUX; the Qwen2.5-VL-7B language
model for Qwen-Image, 28 layers of width 3584). Resolutions and LoRA ranks are each model's Flow-GRPO /
DiffusionNFT recipe; the memory options are what one 80 GB GPU needs for LoRA training at that size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

SD35_LARGE = dict(
    sample_size=128,
    patch_size=2,
    in_channels=16,
    num_layers=38,
    attention_head_dim=64,
    num_attention_heads=38,
    joint_attention_dim=4096,
    caption_projection_dim=2432,
    pooled_projection_dim=2048,
    out_channels=16,
    pos_embed_max_size=192,
    qk_norm="rms_norm",
)
FLUX1_DEV = dict(
    patch_size=1,
    in_channels=64,
    num_layers=19,
    num_single_layers=38,
    attention_head_dim=128,
    num_attention_heads=24,
    joint_attention_dim=4096,
    pooled_projection_dim=768,
    guidance_embeds=True,
    axes_dims_rope=(16, 56, 56),
)
QWEN_IMAGE = dict(
    patch_size=2,
    in_channels=64,
    out_channels=16,
    num_layers=60,
    attention_head_dim=128,
    num_attention_heads=24,
    joint_attention_dim=3584,
    guidance_embeds=False,
    axes_dims_rope=(16, 56, 56),
)
#: T5-XXL's encoder (google/t5-v1_1-xxl, as text_encoder_3 / text_encoder_2 of SD3.5 and FLUX): 4.76 B
T5_XXL = dict(
    vocab_size=32128,
    d_model=4096,
    d_kv=64,
    d_ff=10240,
    num_layers=24,
    num_heads=64,
    feed_forward_proj="gated-gelu",
    relative_attention_num_buckets=32,
)
#: Qwen2.5-VL-7B's language model (the part QwenImagePipeline's encode_prompt runs for text prompts): 7.1 B
QWEN25_VL_7B_TEXT = dict(
    vocab_size=152064,
    hidden_size=3584,
    intermediate_size=18944,
    num_hidden_layers=28,
    num_attention_heads=28,
    num_key_value_heads=4,
    max_position_embeddings=128000,
    rope_theta=1000000.0,
)


@dataclass(frozen=True)
class RealSize:
    """One row of the table: a model at its recipe resolution with the memory options it needs."""

    key: str
    label: str
    #: the omni-rl model plugin and the diffusers transformer class
    model: str
    transformer_class: str
    transformer: dict[str, Any]
    #: published parameter count of the transformer (B), the builder's count is checked against it
    published_b: float
    height: int
    steps: int
    cfg: float
    lora_rank: int
    lora_alpha: float
    group_size: int
    #: ``[model] options`` that make it fit on one 80 GB GPU
    memory_options: dict[str, Any] = field(default_factory=dict)


def _sizes() -> list[RealSize]:
    common: dict[str, Any] = {"dtype": "bfloat16", "gradient_checkpointing": True}
    return [
        RealSize(
            "sd35l", "SD3.5-Large", "sd3", "SD3Transformer2DModel", SD35_LARGE, 8.06, 1024, 10, 4.5, 32, 64, 4,
            {**common},
        ),
        RealSize(
            "flux", "FLUX.1-dev", "flux", "FluxTransformer2DModel", FLUX1_DEV, 11.90, 1024, 10, 1.0, 32, 64, 4,
            {**common, "offload_text_encoders": True, "prompt_cache_size": 4096},
        ),
        RealSize(
            "qwen", "Qwen-Image", "qwen_image", "QwenImageTransformer2DModel", QWEN_IMAGE, 20.43, 1024, 10, 4.0, 64,
            128, 4, {**common, "offload_text_encoders": True, "prompt_cache_size": 4096},
        ),
    ]  # fmt: skip


SIZES: dict[str, RealSize] = {size.key: size for size in _sizes()}


def transformer_factory(size: RealSize, **overrides: Any) -> Callable[[], Any]:
    """A no-argument constructor of the size's diffusers transformer (``overrides`` shrink it in tests)."""
    import diffusers

    cls = getattr(diffusers, size.transformer_class)
    return lambda: cls(**{**size.transformer, **overrides})
