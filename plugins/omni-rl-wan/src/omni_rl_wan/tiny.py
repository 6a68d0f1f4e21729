"""Write tiny random WanPipeline directories for tests, examples and CPU benchmarks.

The directory is a real diffusers pipeline (``save_pretrained`` of every component, the real classes:
``WanTransformer3DModel``, ``AutoencoderKLWan``, transformers' ``UMT5EncoderModel``, a T5 tokenizer built offline,
``FlowMatchEulerDiscreteScheduler``), so tests exercise the loading code real Wan weights go through and
``WanPipeline.from_pretrained(path)`` runs it end to end offline. It keeps what matters for correctness: the
(1, 2, 2) patching of 16-channel latents, a causal 3-D VAE with 8x spatial and 4x temporal compression (``num_frames
= 4k + 1``), latent mean/std that are not 0/1, text padded with zero embeddings to ``max_sequence_length``, the
shift-3 flow-matching schedule and, for ``two_experts = True``, Wan2.2 A14B's layout: a high-noise ``transformer`` and
a low-noise ``transformer_2`` with different weights, switched at ``boundary_ratio`` (0.875, A14B's T2V value).

Defaults: 2 transformer layers, 32x32 px and 5 frames make 2x4x4 latents (8 video tokens), ~2 MB on disk.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from omni_rl_pipelines.tiny import (
    TINY_MARKER,
    name_tokenizer_class,
    seeded_components,
    tiny_latent_stats,
    write_tiny_pipeline,
)
from omni_rl_pipelines.tiny_tokenizers import t5_pieces, write_t5_tokenizer

from omni_rl.errors import ConfigError

if TYPE_CHECKING:
    from diffusers import WanPipeline

__all__ = ["TINY_MARKER", "TinyWanShape", "build_tiny_wan_pipeline", "random_pipeline"]

#: Wan2.1 T2V's flow shift at 480p (its UniPC scheduler's ``flow_shift``); the tiny pipeline samples with Euler
WAN_SHIFT = 3.0
#: Wan2.2 A14B text-to-video's ``boundary_ratio``: the high-noise expert runs the steps with t >= 875
WAN22_BOUNDARY_RATIO = 0.875


@attrs.frozen(kw_only=True)
class TinyWanShape:
    """The shape arguments of :func:`build_tiny_wan_pipeline`, checked together before anything is built."""

    num_layers: int = 2
    num_attention_heads: int = 2
    #: split by Wan's RoPE into (frame, height, width) parts: 2 * (d // 6) each for height and width, the rest frames
    attention_head_dim: int = 16
    ffn_dim: int = 64
    latent_channels: int = 16
    vae_base_dim: int = 8
    text_hidden_size: int = 32
    text_layers: int = 2
    text_heads: int = 4

    def check(self) -> None:
        """Raise ConfigError for shapes diffusers would accept but Wan's RoPE or UMT5 cannot run."""
        if self.attention_head_dim < 6 or self.attention_head_dim % 2:
            raise ConfigError(
                f"attention_head_dim {self.attention_head_dim} cannot be split into Wan's 3-D RoPE",
                hint="use an even head dim of at least 6, e.g. 16",
            )
        if self.text_hidden_size % self.text_heads:
            raise ConfigError(
                f"text_hidden_size {self.text_hidden_size} is not a multiple of text_heads {self.text_heads}",
                hint="e.g. text_hidden_size=32 with text_heads=4",
            )


def build_tiny_wan_pipeline(
    path: str | os.PathLike[str],
    *,
    seed: int = 0,
    two_experts: bool = False,
    boundary_ratio: float = WAN22_BOUNDARY_RATIO,
    shape: TinyWanShape | None = None,
    overwrite: bool = False,
    exist_ok: bool = False,
) -> Path:
    """Write a random WanPipeline to ``path`` and return it: Wan2.1's layout, or with ``two_experts`` Wan2.2 A14B's
    (``transformer_2`` and ``boundary_ratio``).

    Weights depend only on ``seed`` and ``shape``. An existing ``path`` is an error unless ``overwrite`` (replace
    it) or ``exist_ok`` (keep it, build nothing). The directory appears atomically, so several workers racing to
    build the same path all end up loading one complete pipeline."""
    shape = shape or TinyWanShape()
    shape.check()
    if two_experts and not 0.0 < boundary_ratio < 1.0:
        raise ConfigError(f"boundary_ratio must be in (0, 1), got {boundary_ratio}", hint="e.g. 0.875 (Wan2.2 A14B)")

    def write(out: Path, scratch: Path) -> None:
        tokenizer_dir = scratch / "tokenizer"
        pipeline = random_pipeline(
            shape, seed=seed, tokenizer_dir=tokenizer_dir, two_experts=two_experts, boundary_ratio=boundary_ratio
        )
        pipeline.save_pretrained(out, safe_serialization=True)
        _portable_tokenizer(out)

    marker = {
        "builder": "omni_rl_wan.tiny.build_tiny_wan_pipeline",
        "seed": seed,
        "two_experts": two_experts,
        "boundary_ratio": boundary_ratio if two_experts else None,
        "shape": attrs.asdict(shape),
        "random_weights": True,
    }
    return write_tiny_pipeline(path, write, label="Wan", marker=marker, overwrite=overwrite, exist_ok=exist_ok)


def random_pipeline(
    shape: TinyWanShape, *, seed: int, tokenizer_dir: Path, two_experts: bool = False, boundary_ratio: float = 0.875
) -> WanPipeline:
    """Every component with seeded random weights (the caller's global RNG is left alone)."""
    from diffusers import FlowMatchEulerDiscreteScheduler, WanPipeline
    from transformers import T5TokenizerFast

    write_t5_tokenizer(tokenizer_dir)
    tokenizer = T5TokenizerFast.from_pretrained(tokenizer_dir)
    # one seed per component, so changing one component's shape leaves the others' weights unchanged
    builders: list[Any] = [lambda: tiny_transformer(shape), lambda: _vae(shape), lambda: _text_encoder(shape)]
    if two_experts:
        builders.append(lambda: tiny_transformer(shape))
    transformer, vae, text_encoder, *second = seeded_components(seed, *builders)
    transformer_2 = second[0] if second else None
    return WanPipeline(
        tokenizer=tokenizer,
        text_encoder=text_encoder,
        vae=vae,
        scheduler=FlowMatchEulerDiscreteScheduler(shift=WAN_SHIFT, num_train_timesteps=1000),
        transformer=transformer,
        transformer_2=transformer_2,
        boundary_ratio=boundary_ratio if two_experts else None,
    )


def _portable_tokenizer(directory: Path) -> None:
    """Name the tokenizer ``T5TokenizerFast`` in model_index.json, as the Wan hub repositories' UMT5 tokenizer
    loads, so transformers 4 (which needs the fast class to read ``tokenizer.json``) and 5 both load it."""
    name_tokenizer_class(directory, "tokenizer", "T5TokenizerFast")


def tiny_transformer(shape: TinyWanShape, patch_size: tuple[int, int, int] = (1, 2, 2), **overrides: Any) -> Any:
    """A random ``WanTransformer3DModel`` of ``shape`` (the caller seeds torch); ``patch_size`` (frames, height,
    width) is Wan's (1, 2, 2) unless a caller needs fewer tokens (the shapes motion model's (1, 4, 4)).
    ``overrides`` replace config values (the image-to-video layouts' ``in_channels``, ``image_dim``, ...)."""
    from diffusers import WanTransformer3DModel

    config: dict[str, Any] = {
        "patch_size": patch_size,
        "num_attention_heads": shape.num_attention_heads,
        "attention_head_dim": shape.attention_head_dim,
        "in_channels": shape.latent_channels,
        "out_channels": shape.latent_channels,
        "text_dim": shape.text_hidden_size,
        "freq_dim": 32,
        "ffn_dim": shape.ffn_dim,
        "num_layers": shape.num_layers,
        "cross_attn_norm": True,
        "qk_norm": "rms_norm_across_heads",
        "rope_max_seq_len": 32,
    }
    return WanTransformer3DModel(**{**config, **overrides}).eval()


def _vae(shape: TinyWanShape) -> Any:
    from diffusers import AutoencoderKLWan

    channels = shape.latent_channels
    mean, std = tiny_latent_stats(channels)
    return AutoencoderKLWan(
        base_dim=shape.vae_base_dim,
        z_dim=channels,
        dim_mult=[1, 1, 1, 1],
        num_res_blocks=1,
        temperal_downsample=[False, True, True],
        latents_mean=mean,
        latents_std=std,
    ).eval()


def _text_encoder(shape: TinyWanShape) -> Any:
    from transformers import UMT5Config, UMT5EncoderModel

    config = UMT5Config(
        vocab_size=len(t5_pieces()),
        d_model=shape.text_hidden_size,
        d_kv=shape.text_hidden_size // shape.text_heads,
        d_ff=2 * shape.text_hidden_size,
        num_layers=shape.text_layers,
        num_heads=shape.text_heads,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=32,
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
    )
    return UMT5EncoderModel(config).eval()
