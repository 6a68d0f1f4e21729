"""Write tiny random Wan image-to-video pipelines (the three layouts ``WanImageToVideoPipeline`` runs) for tests and
examples, built offline from the same pieces as :mod:`omni_rl_wan.tiny`'s text-to-video pipeline.

* **Wan2.1 I2V** (:func:`build_tiny_wan_i2v_pipeline`): a ``WanImageToVideoPipeline`` whose transformer takes 36
  input channels ([noisy 16, mask 4, condition 16]) and CLIP image tokens in its cross-attention (``image_dim``,
  ``added_kv_proj_dim``), with a tiny ``CLIPVisionModel`` (the class the Wan2.1 I2V repositories ship, whose
  penultimate hidden states the pipeline reads) and a ``CLIPImageProcessor`` (224 px in the real model, 32 px here).
* **Wan2.2 I2V-A14B** (``two_experts=True``): the same 36-channel transformers as a high-noise ``transformer`` and a
  low-noise ``transformer_2`` with ``boundary_ratio`` 0.9 (the A14B I2V value), no image encoder.
* **Wan2.2 TI2V-5B** (:func:`build_tiny_wan_ti2v_pipeline`): saved as the hub's TI2V-5B is, a ``WanPipeline`` with
  ``expand_timesteps = true`` that ``WanImageToVideoPipeline`` also loads; a 48-channel residual VAE with 2x2
  patching and 16x spatial compression (the Wan2.2 VAE's layout) and a 48-channel transformer.

Frame counts are 4k + 1 as for the text-to-video pipeline. Sizes: Wan2.1 / A14B take multiples of 16 px (32x32 px
and 5 frames make 2x4x4 latents), TI2V multiples of 32 px (64x64 px and 5 frames make 2x4x4 latents).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import attrs
from omni_rl_pipelines.tiny import seeded_components, tiny_latent_stats, write_tiny_pipeline
from omni_rl_pipelines.tiny_tokenizers import write_t5_tokenizer

from omni_rl.errors import ConfigError
from omni_rl_wan.tiny import WAN_SHIFT, TinyWanShape, _portable_tokenizer, _text_encoder, _vae, tiny_transformer

__all__ = [
    "TI2V_LATENT_CHANNELS",
    "WAN22_I2V_BOUNDARY_RATIO",
    "build_tiny_wan_i2v_pipeline",
    "build_tiny_wan_ti2v_pipeline",
]

#: Wan2.2 I2V-A14B's ``boundary_ratio``: the high-noise expert runs the steps with t >= 900
WAN22_I2V_BOUNDARY_RATIO = 0.9
#: the Wan2.2 VAE's latent channels (TI2V-5B)
TI2V_LATENT_CHANNELS = 48
#: the mask channels of the I2V transformer's input: the VAE's temporal factor (4), one per frame of a latent frame
MASK_CHANNELS = 4
#: the tiny CLIP vision tower: 32 px images in 8 px patches give 16 + 1 tokens of width 16
CLIP_IMAGE_SIZE, CLIP_PATCH, CLIP_HIDDEN = 32, 8, 16


def build_tiny_wan_i2v_pipeline(
    path: str | os.PathLike[str],
    *,
    seed: int = 0,
    two_experts: bool = False,
    boundary_ratio: float = WAN22_I2V_BOUNDARY_RATIO,
    shape: TinyWanShape | None = None,
    overwrite: bool = False,
    exist_ok: bool = False,
) -> Path:
    """Write a random ``WanImageToVideoPipeline`` to ``path`` and return it: Wan2.1 I2V's layout (CLIP image
    encoder), or with ``two_experts`` Wan2.2 I2V-A14B's (``transformer_2``, ``boundary_ratio``, no image encoder).

    Weights depend only on ``seed`` and ``shape``; ``overwrite`` / ``exist_ok`` and the atomic write are
    :func:`omni_rl_pipelines.tiny.write_tiny_pipeline`'s."""
    shape = shape or TinyWanShape()
    shape.check()
    if two_experts and not 0.0 < boundary_ratio < 1.0:
        raise ConfigError(f"boundary_ratio must be in (0, 1), got {boundary_ratio}", hint="e.g. 0.9 (Wan2.2 I2V-A14B)")

    def write(out: Path, scratch: Path) -> None:
        pipeline = _i2v_pipeline(shape, seed, scratch / "tokenizer", two_experts, boundary_ratio)
        pipeline.save_pretrained(out, safe_serialization=True)
        _portable_tokenizer(out)

    marker = {
        "builder": "omni_rl_wan.i2v_tiny.build_tiny_wan_i2v_pipeline",
        "layout": "wan22_i2v_a14b" if two_experts else "wan21_i2v",
        "seed": seed,
        "boundary_ratio": boundary_ratio if two_experts else None,
        "shape": attrs.asdict(shape),
        "random_weights": True,
    }
    return write_tiny_pipeline(path, write, label="Wan I2V", marker=marker, overwrite=overwrite, exist_ok=exist_ok)


def build_tiny_wan_ti2v_pipeline(
    path: str | os.PathLike[str],
    *,
    seed: int = 0,
    shape: TinyWanShape | None = None,
    overwrite: bool = False,
    exist_ok: bool = False,
) -> Path:
    """Write a random Wan2.2 TI2V-5B-layout pipeline to ``path``: a ``WanPipeline`` directory with
    ``expand_timesteps = true``, a 48-channel Wan2.2-style VAE (residual, 2x2 patches, 16x spatial) and a 48-channel
    transformer, which ``WanPipeline`` runs as text-to-video and ``WanImageToVideoPipeline`` as image-to-video."""
    shape = shape or TinyWanShape(latent_channels=TI2V_LATENT_CHANNELS)
    shape.check()

    def write(out: Path, scratch: Path) -> None:
        from diffusers import FlowMatchEulerDiscreteScheduler, WanPipeline
        from transformers import T5TokenizerFast

        write_t5_tokenizer(scratch / "tokenizer")
        builders = [lambda: tiny_transformer(shape), lambda: _wan22_vae(shape), lambda: _text_encoder(shape)]
        transformer, vae, text_encoder = seeded_components(seed, *builders)
        pipeline = WanPipeline(
            tokenizer=T5TokenizerFast.from_pretrained(scratch / "tokenizer"),
            text_encoder=text_encoder,
            vae=vae,
            scheduler=FlowMatchEulerDiscreteScheduler(shift=WAN_SHIFT, num_train_timesteps=1000),
            transformer=transformer,
            expand_timesteps=True,
        )
        pipeline.save_pretrained(out, safe_serialization=True)
        _portable_tokenizer(out)

    marker = {
        "builder": "omni_rl_wan.i2v_tiny.build_tiny_wan_ti2v_pipeline",
        "layout": "wan22_ti2v_5b",
        "seed": seed,
        "shape": attrs.asdict(shape),
        "random_weights": True,
    }
    return write_tiny_pipeline(path, write, label="Wan TI2V", marker=marker, overwrite=overwrite, exist_ok=exist_ok)


def _i2v_pipeline(shape: TinyWanShape, seed: int, tokenizer_dir: Path, two_experts: bool, boundary_ratio: float) -> Any:
    """Every component of a Wan2.1 I2V / Wan2.2 I2V-A14B pipeline with seeded random weights."""
    from diffusers import FlowMatchEulerDiscreteScheduler, WanImageToVideoPipeline
    from transformers import CLIPImageProcessor, T5TokenizerFast

    write_t5_tokenizer(tokenizer_dir)
    channels = shape.latent_channels
    inner = shape.num_attention_heads * shape.attention_head_dim
    # Wan2.1 I2V's cross-attention reads CLIP tokens through its own key/value projections (added_kv_proj_dim is the
    # transformer's width, 5120 in the 14B); Wan2.2 I2V-A14B has neither
    image = {} if two_experts else {"image_dim": CLIP_HIDDEN, "added_kv_proj_dim": inner}
    expert = {"in_channels": 2 * channels + MASK_CHANNELS, "out_channels": channels, **image}
    builders: list[Any] = [lambda: tiny_transformer(shape, **expert), lambda: _vae(shape), lambda: _text_encoder(shape)]
    builders.append((lambda: tiny_transformer(shape, **expert)) if two_experts else _clip_vision)
    transformer, vae, text_encoder, last = seeded_components(seed, *builders)
    return WanImageToVideoPipeline(
        tokenizer=T5TokenizerFast.from_pretrained(tokenizer_dir),
        text_encoder=text_encoder,
        vae=vae,
        scheduler=FlowMatchEulerDiscreteScheduler(shift=WAN_SHIFT, num_train_timesteps=1000),
        image_processor=None if two_experts else _clip_processor(CLIPImageProcessor),
        image_encoder=None if two_experts else last,
        transformer=transformer,
        transformer_2=last if two_experts else None,
        boundary_ratio=boundary_ratio if two_experts else None,
    )


def _clip_vision() -> Any:
    """A random CLIP vision tower: the pipeline reads its penultimate hidden states (B, 17, 16)."""
    from transformers import CLIPVisionConfig, CLIPVisionModel

    config = CLIPVisionConfig(
        hidden_size=CLIP_HIDDEN,
        intermediate_size=2 * CLIP_HIDDEN,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=CLIP_IMAGE_SIZE,
        patch_size=CLIP_PATCH,
    )
    return CLIPVisionModel(config).eval()


def _clip_processor(processor_class: Any) -> Any:
    """CLIP's preprocessing (resize the short side, centre crop, CLIP's mean/std) at the tiny tower's 32 px."""
    return processor_class(
        size={"shortest_edge": CLIP_IMAGE_SIZE}, crop_size={"height": CLIP_IMAGE_SIZE, "width": CLIP_IMAGE_SIZE}
    )


def _wan22_vae(shape: TinyWanShape) -> Any:
    """The Wan2.2 VAE's layout, tiny: 48 latent channels, residual blocks, 2x2 patchification (12 pixel channels)
    and 16x spatial / 4x temporal compression."""
    from diffusers import AutoencoderKLWan

    mean, std = tiny_latent_stats(shape.latent_channels)
    return AutoencoderKLWan(
        base_dim=shape.vae_base_dim,
        z_dim=shape.latent_channels,
        dim_mult=[1, 1, 1, 1],
        num_res_blocks=1,
        temperal_downsample=[False, True, True],
        is_residual=True,
        in_channels=12,
        out_channels=12,
        patch_size=2,
        scale_factor_spatial=16,
        latents_mean=mean,
        latents_std=std,
    ).eval()
