"""Write tiny random QwenImagePipeline directories for tests, examples and CPU benchmarks.

The directory is a real diffusers pipeline (``save_pretrained`` of every component, the real classes:
``QwenImageTransformer2DModel``, ``AutoencoderKLQwenImage``, ``Qwen2_5_VLForConditionalGeneration``,
``Qwen2Tokenizer``, ``FlowMatchEulerDiscreteScheduler``), so tests exercise the loading code real Qwen-Image
weights go through, and ``QwenImagePipeline.from_pretrained(path)`` runs it end to end offline. It keeps what
matters for correctness: 2x2 packing of 16-channel latents, the system-prompt template dropped at 34 tokens (the
tokenizer spells it as the real one does), a text encoder with grouped KV heads and multimodal RoPE, VAE latent
mean/std that are not 0/1, and Qwen-Image's scheduler (resolution-dependent exponential shift, terminal sigma).

Defaults: 2 transformer layers, a 4x VAE, 64x64 px images (16x16 latents, 64 image tokens), ~8 MB on disk.
:class:`TinyQwenImageShape` takes every size, so a larger model (e.g. one pretrained on a shapes data set) is
``build_tiny_qwen_image_pipeline(path, num_layers=8, attention_head_dim=32, num_attention_heads=8, ...)``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from omni_rl_pipelines.tiny import TINY_MARKER, seeded_components, tiny_latent_stats, write_tiny_pipeline

from omni_rl.errors import ConfigError
from omni_rl_qwen_image.tiny_tokenizer import (
    ENDOFTEXT,
    IM_END,
    TEXT_TO_IMAGE_WORDS,
    special_token_ids,
    vocab_and_merges,
    write_qwen2_tokenizer,
)

if TYPE_CHECKING:
    from diffusers import QwenImagePipeline

__all__ = [
    "QWEN_IMAGE_SCHEDULER",
    "TINY_MARKER",
    "TinyQwenImageShape",
    "build_tiny_qwen_image_pipeline",
    "random_pipeline",
]

#: Qwen/Qwen-Image's scheduler_config.json: an exponential, resolution-dependent shift (mu from the image token
#: count) and a terminal sigma of 0.02 before the final 0.
QWEN_IMAGE_SCHEDULER: dict[str, Any] = {
    "base_image_seq_len": 256,
    "base_shift": 0.5,
    "invert_sigmas": False,
    "max_image_seq_len": 8192,
    "max_shift": 0.9,
    "num_train_timesteps": 1000,
    "shift": 1.0,
    "shift_terminal": 0.02,
    "stochastic_sampling": False,
    "time_shift_type": "exponential",
    "use_beta_sigmas": False,
    "use_dynamic_shifting": True,
    "use_exponential_sigmas": False,
    "use_karras_sigmas": False,
}


@attrs.frozen(kw_only=True)
class TinyQwenImageShape:
    """The shape arguments of :func:`build_tiny_qwen_image_pipeline`, checked together before anything is built."""

    num_layers: int = 2
    num_attention_heads: int = 2
    attention_head_dim: int = 16
    #: RoPE dims of the (frame, height, width) axes; they must add up to attention_head_dim
    axes_dims_rope: tuple[int, int, int] = attrs.field(default=(8, 4, 4), converter=tuple)
    latent_channels: int = 16
    vae_base_dim: int = 8
    #: one entry per VAE stage; the VAE downsamples by 2 ** (len(vae_dim_mult) - 1)
    vae_dim_mult: tuple[int, ...] = attrs.field(default=(1, 2, 4), converter=tuple)
    text_hidden_size: int = 32
    text_layers: int = 2
    text_heads: int = 2
    text_kv_heads: int = 1

    @property
    def vae_scale_factor(self) -> int:
        return 2 ** (len(self.vae_dim_mult) - 1)

    def check(self) -> None:
        """Raise ConfigError for shapes diffusers or transformers would accept but Qwen-Image's path breaks on."""
        if sum(self.axes_dims_rope) != self.attention_head_dim or any(d % 2 for d in self.axes_dims_rope):
            raise ConfigError(
                f"axes_dims_rope {self.axes_dims_rope} must be even and add up to attention_head_dim "
                f"({self.attention_head_dim})",
                hint="e.g. attention_head_dim=16 with axes_dims_rope=(8, 4, 4)",
            )
        text_head_dim = self.text_hidden_size // self.text_heads
        if self.text_hidden_size % self.text_heads or text_head_dim % 4 or self.text_heads % self.text_kv_heads:
            raise ConfigError(
                f"text_hidden_size {self.text_hidden_size} with {self.text_heads} heads ({self.text_kv_heads} KV) "
                "does not make a Qwen2.5-VL text model",
                hint="the head dim must be a multiple of 4 (multimodal RoPE) and heads a multiple of KV heads",
            )
        if len(self.vae_dim_mult) < 2:
            raise ConfigError("vae_dim_mult needs at least two stages", hint="e.g. (1, 2, 4): a 4x VAE")

    @property
    def mrope_section(self) -> list[int]:
        """Qwen2.5-VL splits half the text head dim into (temporal, height, width) RoPE sections."""
        half = self.text_hidden_size // self.text_heads // 2
        spatial = 3 * half // 8  # the real model's [16, 24, 24] of 64
        return [half - 2 * spatial, spatial, spatial]


def build_tiny_qwen_image_pipeline(
    path: str | os.PathLike[str],
    *,
    seed: int = 0,
    shape: TinyQwenImageShape | None = None,
    overwrite: bool = False,
    exist_ok: bool = False,
) -> Path:
    """Write a random QwenImagePipeline to ``path`` and return it.

    Weights depend only on ``seed`` and ``shape``. An existing ``path`` is an error unless ``overwrite`` (replace
    it) or ``exist_ok`` (keep it, build nothing). The directory appears atomically (built beside it, then
    renamed), so several workers racing to build the same path all end up loading one complete pipeline.
    """
    shape = shape or TinyQwenImageShape()
    shape.check()

    def write(out: Path, scratch: Path) -> None:
        random_pipeline(shape, seed=seed, tokenizer_dir=scratch / "tokenizer").save_pretrained(
            out, safe_serialization=True
        )
        write_qwen2_tokenizer(out / "tokenizer")  # the files the hub's tokenizer/ holds, whatever transformers saved

    marker = {
        "builder": "omni_rl_qwen_image.tiny.build_tiny_qwen_image_pipeline",
        "seed": seed,
        "shape": attrs.asdict(shape),
        "random_weights": True,
    }
    return write_tiny_pipeline(path, write, label="Qwen-Image", marker=marker, overwrite=overwrite, exist_ok=exist_ok)


def random_pipeline(shape: TinyQwenImageShape, *, seed: int, tokenizer_dir: Path) -> QwenImagePipeline:
    """Every component with seeded random weights (the caller's global RNG is left alone)."""
    from diffusers import FlowMatchEulerDiscreteScheduler, QwenImagePipeline
    from transformers import Qwen2Tokenizer

    write_qwen2_tokenizer(tokenizer_dir)
    tokenizer = Qwen2Tokenizer.from_pretrained(tokenizer_dir)
    # one seed per component, so changing one component's shape leaves the others' weights unchanged
    transformer, vae, text_encoder = seeded_components(
        seed, lambda: _transformer(shape), lambda: _vae(shape), lambda: _text_encoder(shape)
    )
    return QwenImagePipeline(
        transformer=transformer,
        vae=vae,
        text_encoder=text_encoder,
        tokenizer=tokenizer,
        scheduler=FlowMatchEulerDiscreteScheduler.from_config(QWEN_IMAGE_SCHEDULER),
    )


def _transformer(shape: TinyQwenImageShape, *, zero_cond_t: bool = False) -> Any:
    """``zero_cond_t``: Qwen-Image-Edit-2511's flag, condition tokens modulated as t = 0 (``edit_tiny``)."""
    from diffusers import QwenImageTransformer2DModel

    return QwenImageTransformer2DModel(
        patch_size=2,
        in_channels=4 * shape.latent_channels,  # 2x2 packed latents
        out_channels=shape.latent_channels,
        num_layers=shape.num_layers,
        attention_head_dim=shape.attention_head_dim,
        num_attention_heads=shape.num_attention_heads,
        joint_attention_dim=shape.text_hidden_size,
        guidance_embeds=False,
        axes_dims_rope=shape.axes_dims_rope,
        zero_cond_t=zero_cond_t,
    )


def _vae(shape: TinyQwenImageShape) -> Any:
    from diffusers import AutoencoderKLQwenImage

    channels = shape.latent_channels
    mean, std = tiny_latent_stats(channels)
    return AutoencoderKLQwenImage(
        base_dim=shape.vae_base_dim,
        z_dim=channels,
        dim_mult=list(shape.vae_dim_mult),
        num_res_blocks=1,
        temperal_downsample=[False] + [True] * (len(shape.vae_dim_mult) - 2),
        latents_mean=mean,
        latents_std=std,
    ).eval()


def _text_encoder(
    shape: TinyQwenImageShape, *, words: tuple[str, ...] = TEXT_TO_IMAGE_WORDS, vision_depth: int = 1
) -> Any:
    """Qwen2.5-VL whose special-token ids are those of the tiny tokenizer of ``words``; the edit pipelines' VLM sees
    images, so theirs has a deeper vision tower (``vision_depth``; omni_rl_qwen_image.edit_tiny)."""
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    ids = special_token_ids(words)
    vocab, _ = vocab_and_merges(words)
    config = Qwen2_5_VLConfig(
        text_config={
            "vocab_size": len(vocab),
            "hidden_size": shape.text_hidden_size,
            "intermediate_size": 2 * shape.text_hidden_size,
            "num_hidden_layers": shape.text_layers,
            "num_attention_heads": shape.text_heads,
            "num_key_value_heads": shape.text_kv_heads,
            "max_position_embeddings": 4096,
            "rope_theta": 1_000_000.0,
            "rope_scaling": {"mrope_section": shape.mrope_section, "rope_type": "default", "type": "default"},
            "bos_token_id": ids[ENDOFTEXT],
            "eos_token_id": ids[IM_END],
            "pad_token_id": ids[ENDOFTEXT],
        },
        vision_config={
            "depth": vision_depth,
            "hidden_size": 16,
            "intermediate_size": 16,
            "num_heads": 2,
            "out_hidden_size": shape.text_hidden_size,
            "fullatt_block_indexes": [vision_depth - 1],
        },
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
    )
    return Qwen2_5_VLForConditionalGeneration(config).eval()
