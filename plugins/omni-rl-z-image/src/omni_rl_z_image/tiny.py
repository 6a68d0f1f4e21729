"""Tiny random Z-Image pipelines for tests and examples, written offline.

:func:`build_tiny_z_image_pipeline` writes a real ``ZImagePipeline`` directory (``save_pretrained`` of every
component) with random weights: a ``ZImageTransformer2DModel`` (noise and context refiners, single-stream layers,
3-axis RoPE), the FLUX-style ``AutoencoderKL`` Z-Image uses (16 channels, scaling and shift factors not 1/0), a
random ``Qwen3Model`` text encoder and a synthesised Qwen3 tokenizer with its chat template. ``variant`` picks the
scheduler: ``"turbo"`` is Z-Image-Turbo's published config (fixed shift 3.0, no dynamic shifting: its few-step
schedule), ``"base"`` a dynamically shifted one (mu from the image token count), so both branches of the pipeline's
schedule are exercised. The variant is recorded in the tiny marker, which the Turbo-without-KL check reads.

Defaults: 2 main layers, 1 refiner layer each, a 4x VAE, 32x32 px images (8x8 latents, 16 image tokens).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import attrs
from omni_rl_pipelines.tiny import check_vae_widths, seeded_components, tiny_vae, write_tiny_pipeline
from omni_rl_pipelines.tiny_qwen3 import ENDOFTEXT, IM_END, qwen3_vocab, write_qwen3_tokenizer

from omni_rl.errors import ConfigError

if TYPE_CHECKING:
    from diffusers import ZImagePipeline

__all__ = ["BASE_SCHEDULER", "TURBO_SCHEDULER", "TinyZImageShape", "build_tiny_z_image_pipeline", "random_pipeline"]

#: Tongyi-MAI/Z-Image-Turbo's scheduler_config.json: a fixed shift of 3 (8-9 steps, no CFG)
TURBO_SCHEDULER: dict[str, Any] = {"num_train_timesteps": 1000, "use_dynamic_shifting": False, "shift": 3.0}
#: a dynamically shifted flow-matching schedule (mu = calculate_shift(image tokens)): the pipeline's other branch
BASE_SCHEDULER: dict[str, Any] = {
    "num_train_timesteps": 1000,
    "use_dynamic_shifting": True,
    "base_image_seq_len": 256,
    "max_image_seq_len": 4096,
    "base_shift": 0.5,
    "max_shift": 1.15,
    "shift": 1.0,
}
SCHEDULERS = {"turbo": TURBO_SCHEDULER, "base": BASE_SCHEDULER}

#: the FLUX VAE's factors, which Z-Image's VAE uses
VAE_SCALING_FACTOR = 0.3611
VAE_SHIFT_FACTOR = 0.1159


@attrs.frozen(kw_only=True)
class TinyZImageShape:
    """The shape arguments of :func:`build_tiny_z_image_pipeline`, checked together before anything is built."""

    num_layers: int = 2
    num_refiner_layers: int = 1
    num_heads: int = 2
    #: RoPE dims of the (caption/frame, height, width) axes; their sum is the head dim
    axes_dims: tuple[int, int, int] = attrs.field(default=(8, 12, 12), converter=tuple)
    latent_channels: int = 16
    vae_block_out_channels: tuple[int, ...] = attrs.field(default=(8, 16, 16), converter=tuple)
    vae_norm_num_groups: int = 4
    text_hidden_size: int = 32
    text_layers: int = 2
    text_heads: int = 2
    text_kv_heads: int = 1

    @property
    def dim(self) -> int:
        return self.num_heads * sum(self.axes_dims)

    def check(self) -> None:
        """Raise ConfigError for shapes the diffusers classes would accept but Z-Image's path breaks on."""
        if any(d % 2 for d in self.axes_dims):
            raise ConfigError(f"axes_dims {self.axes_dims} must be even (RoPE pairs)", hint="e.g. (8, 12, 12)")
        if self.text_hidden_size % self.text_heads or self.text_heads % self.text_kv_heads:
            raise ConfigError(
                f"text_hidden_size {self.text_hidden_size} with {self.text_heads} heads ({self.text_kv_heads} KV) "
                "does not make a Qwen3 model",
                hint="the hidden size must be a multiple of the heads, the heads a multiple of the KV heads",
            )
        check_vae_widths(self.vae_block_out_channels, self.vae_norm_num_groups, example="(8, 16, 16) with 4 groups")


def build_tiny_z_image_pipeline(
    path: str | os.PathLike[str],
    *,
    seed: int = 0,
    variant: Literal["base", "turbo"] = "base",
    shape: TinyZImageShape | None = None,
    overwrite: bool = False,
    exist_ok: bool = False,
) -> Path:
    """Write a random ZImagePipeline to ``path`` and return it (atomically: workers racing to build one path all
    load one complete pipeline). An existing ``path`` is an error unless ``overwrite`` or ``exist_ok``."""
    if variant not in SCHEDULERS:
        raise ConfigError(f"unknown tiny Z-Image variant {variant!r}", hint="'base' or 'turbo'")
    shape = shape or TinyZImageShape()
    shape.check()

    def write(out: Path, scratch: Path) -> None:
        pipeline = random_pipeline(shape, seed=seed, variant=variant, tokenizer_dir=scratch / "tokenizer")
        pipeline.save_pretrained(out, safe_serialization=True)

    marker = {
        "builder": "omni_rl_z_image.tiny.build_tiny_z_image_pipeline",
        "seed": seed,
        "variant": variant,
        "shape": attrs.asdict(shape),
        "random_weights": True,
    }
    return write_tiny_pipeline(path, write, label="Z-Image", marker=marker, overwrite=overwrite, exist_ok=exist_ok)


def random_pipeline(shape: TinyZImageShape, *, seed: int, variant: str = "base", tokenizer_dir: Path) -> ZImagePipeline:
    """Every component with seeded random weights (the caller's global RNG is left alone)."""
    from diffusers import FlowMatchEulerDiscreteScheduler, ZImagePipeline
    from transformers import AutoTokenizer

    write_qwen3_tokenizer(tokenizer_dir, model_max_length=131072)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    transformer, vae, text_encoder = seeded_components(
        seed, lambda: _transformer(shape), lambda: _vae(shape), lambda: _text_encoder(shape)
    )
    return ZImagePipeline(
        transformer=transformer,
        vae=vae,
        text_encoder=text_encoder,
        tokenizer=tokenizer,
        scheduler=FlowMatchEulerDiscreteScheduler.from_config(SCHEDULERS[variant]),
    )


def _transformer(shape: TinyZImageShape) -> Any:
    import torch
    from diffusers import ZImageTransformer2DModel

    transformer = ZImageTransformer2DModel(
        all_patch_size=(2,),
        all_f_patch_size=(1,),
        in_channels=shape.latent_channels,
        dim=shape.dim,
        n_layers=shape.num_layers,
        n_refiner_layers=shape.num_refiner_layers,
        n_heads=shape.num_heads,
        n_kv_heads=shape.num_heads,
        cap_feat_dim=shape.text_hidden_size,
        axes_dims=list(shape.axes_dims),
        axes_lens=[1536, 64, 64],
    )
    # the real model's pad tokens are trained; zeros would hide a caption or image padded the wrong way
    with torch.no_grad():
        transformer.x_pad_token.normal_(0.0, 0.5)
        transformer.cap_pad_token.normal_(0.0, 0.5)
        for layer in transformer.all_final_layer.values():  # zero-initialised: the output would be all 0
            for p in layer.parameters():
                p.normal_(0.0, 0.05)
    return transformer.eval()


def _vae(shape: TinyZImageShape) -> Any:
    return tiny_vae(
        shape.vae_block_out_channels,
        norm_num_groups=shape.vae_norm_num_groups,
        latent_channels=shape.latent_channels,
        sample_size=32,
        scaling_factor=VAE_SCALING_FACTOR,
        shift_factor=VAE_SHIFT_FACTOR,
    ).eval()


def _text_encoder(shape: TinyZImageShape) -> Any:
    from transformers import Qwen3Config, Qwen3Model

    ids = qwen3_vocab()
    config = Qwen3Config(
        vocab_size=len(ids),
        hidden_size=shape.text_hidden_size,
        intermediate_size=2 * shape.text_hidden_size,
        num_hidden_layers=shape.text_layers,
        num_attention_heads=shape.text_heads,
        num_key_value_heads=shape.text_kv_heads,
        head_dim=shape.text_hidden_size // shape.text_heads,
        max_position_embeddings=2048,
        rope_theta=1_000_000.0,
        bos_token_id=ids[ENDOFTEXT],
        eos_token_id=ids[IM_END],
        pad_token_id=ids[ENDOFTEXT],
        tie_word_embeddings=False,
    )
    return Qwen3Model(config).eval()
