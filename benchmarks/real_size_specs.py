"""The published dimensions of the real models benchmarks/real_sizes.py builds with random weights.

Each transformer config is the one in the model's ``transformer/config.json`` on the hub (stabilityai/
stable-diffusion-3.5-large, black-forest-labs/FLUX.1-dev, Qwen/Qwen-Image; FLUX.2-klein-4B/9B, FLUX.2-dev,
Z-Image and Qwen-Image 2.1 in :data:`COUNTED_SIZES`); the text encoders are the ones the
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
#: black-forest-labs/FLUX.2-klein-4B (and -base-4B): 5 double + 20 single blocks of width 3072, Qwen3-4B's three
#: stacked hidden layers (3 x 2560) as text input; the step-distilled and base variants share the transformer shape
FLUX2_KLEIN_4B = dict(
    in_channels=128,
    num_layers=5,
    num_single_layers=20,
    attention_head_dim=128,
    num_attention_heads=24,
    joint_attention_dim=7680,
    axes_dims_rope=(32, 32, 32, 32),
    guidance_embeds=False,
)
#: black-forest-labs/FLUX.2-klein-9B (and -base-9B): 8 double + 24 single blocks of width 4096, Qwen3-8B (3 x 4096)
FLUX2_KLEIN_9B = dict(
    FLUX2_KLEIN_4B, num_layers=8, num_single_layers=24, num_attention_heads=32, joint_attention_dim=12288
)
#: black-forest-labs/FLUX.2-dev: 8 double + 48 single blocks of width 6144, guidance-distilled, Mistral-Small-3.1's
#: three stacked hidden layers (3 x 5120) as text input
FLUX2_DEV = dict(FLUX2_KLEIN_4B, num_layers=8, num_single_layers=48, num_attention_heads=48, joint_attention_dim=15360)
FLUX2_DEV["guidance_embeds"] = True
#: Tongyi-MAI/Z-Image (and Z-Image-Turbo, the same shape): 30 single-stream layers of width 3840, 2 noise and 2
#: context refiners, Qwen3-4B captions (2560)
Z_IMAGE = dict(
    all_patch_size=(2,),
    all_f_patch_size=(1,),
    in_channels=16,
    dim=3840,
    n_layers=30,
    n_refiner_layers=2,
    n_heads=30,
    n_kv_heads=30,
    cap_feat_dim=2560,
    axes_dims=[32, 48, 48],
    axes_lens=[1536, 512, 512],
)
#: Qwen/Qwen-Image-2.1: QwenImage21Transformer2DModel's documented defaults (32 single-stream block-causal blocks of
#: width 4096, MLP ratio 3, 64 latent channels, Qwen3-VL text of width 4096)
QWEN_IMAGE21 = dict(
    patch_size=1,
    in_channels=64,
    out_channels=64,
    num_layers=32,
    attention_head_dim=128,
    num_attention_heads=32,
    context_in_dim=4096,
    mlp_ratio=3,
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


def _counted_sizes() -> list[RealSize]:
    """The newer architectures: their published transformer dimensions, counted on the meta device in the CPU tests
    (tests/benchmarks/test_bench_real_sizes.py). Their recipe columns are the omni-rl recipes'
    (docs/examples/flux2_klein_base_4b_flow_grpo.toml, z_image_flow_grpo.toml); real_sizes.py's measured training
    step does not build their inputs yet, so they are not in :data:`SIZES`."""
    common: dict[str, Any] = {"dtype": "bfloat16", "gradient_checkpointing": True}
    offload = {**common, "offload_text_encoders": True, "prompt_cache_size": 4096}
    return [
        RealSize(
            "klein4b", "FLUX.2-klein-4B", "flux2_klein", "Flux2Transformer2DModel", FLUX2_KLEIN_4B, 3.88, 512, 10,
            4.0, 32, 64, 16, {**common},
        ),
        RealSize(
            "klein9b", "FLUX.2-klein-9B", "flux2_klein", "Flux2Transformer2DModel", FLUX2_KLEIN_9B, 9.08, 512, 10,
            4.0, 32, 64, 16, {**offload},
        ),
        RealSize(
            "flux2dev", "FLUX.2-dev", "flux2", "Flux2Transformer2DModel", FLUX2_DEV, 32.22, 1024, 10, 4.0, 64, 128,
            4, {**offload, "offload_vae": True},
        ),
        RealSize(
            "zimage", "Z-Image", "z_image", "ZImageTransformer2DModel", Z_IMAGE, 6.15, 512, 10, 4.0, 32, 64, 16,
            {**offload},
        ),
        RealSize(
            "qwen21", "Qwen-Image 2.1", "qwen_image21", "QwenImage21Transformer2DModel", QWEN_IMAGE21, 7.12, 1024,
            10, 1.0, 64, 128, 4, {**offload},
        ),
    ]  # fmt: skip


#: published dimensions counted (meta device), not yet measured by real_sizes.py
COUNTED_SIZES: dict[str, RealSize] = {size.key: size for size in _counted_sizes()}


def transformer_factory(size: RealSize, **overrides: Any) -> Callable[[], Any]:
    """A no-argument constructor of the size's diffusers transformer (``overrides`` shrink it in tests)."""
    import diffusers

    cls = getattr(diffusers, size.transformer_class)
    return lambda: cls(**{**size.transformer, **overrides})
