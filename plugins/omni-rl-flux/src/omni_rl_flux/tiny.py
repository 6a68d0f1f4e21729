"""Write tiny random FluxPipeline directories for tests, examples and CPU benchmarks.

The directory is a real diffusers pipeline (``save_pretrained`` of every component, the real classes:
``FluxTransformer2DModel``, ``AutoencoderKL``, ``CLIPTextModel``, ``T5EncoderModel``, ``CLIPTokenizer``,
``T5TokenizerFast`` built offline by :mod:`omni_rl_pipelines.tiny_tokenizers`, ``FlowMatchEulerDiscreteScheduler``), so
tests exercise the loading code real FLUX weights go through, and ``FluxPipeline.from_pretrained(path)`` runs it
end to end offline. It keeps what matters for correctness: 16 latent channels 2x2-packed into 64-wide tokens,
double- and single-stream blocks, 3-axis RoPE over text and image ids, CLIP pooled + T5 text of different widths,
FLUX's VAE scaling and shift factors, and either FLUX.1-dev's layout (guidance embeddings, resolution-dependent
shift) or FLUX.1-schnell's (neither: a fixed shift of 1).

Defaults: one double and two single blocks, a 4x VAE, 32x32 px images (8x8 latents, 16 image tokens), ~2 MB.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import attrs
from omni_rl_pipelines.tiny import (
    TINY_MARKER,
    check_vae_widths,
    name_tokenizer_class,
    seeded_components,
    tiny_clip_config,
    tiny_t5,
    tiny_vae,
    write_tiny_pipeline,
)
from omni_rl_pipelines.tiny_tokenizers import CLIP_EOS, write_clip_tokenizer, write_clip_vocab_files, write_t5_tokenizer

from omni_rl.errors import ConfigError

if TYPE_CHECKING:
    from diffusers import FluxPipeline

__all__ = ["TINY_MARKER", "TinyFluxShape", "build_tiny_flux_pipeline"]

#: black-forest-labs/FLUX.1-dev's scheduler_config.json: mu from the image token count (dynamic shifting)
FLUX_DEV_SCHEDULER: dict[str, Any] = {
    "base_image_seq_len": 256,
    "base_shift": 0.5,
    "max_image_seq_len": 4096,
    "max_shift": 1.15,
    "num_train_timesteps": 1000,
    "shift": 3.0,
    "use_dynamic_shifting": True,
}
#: black-forest-labs/FLUX.1-schnell's: no dynamic shifting, shift 1 (the 4-step timestep-distilled schedule)
FLUX_SCHNELL_SCHEDULER: dict[str, Any] = {**FLUX_DEV_SCHEDULER, "shift": 1.0, "use_dynamic_shifting": False}
#: FLUX's VAE latent normalisation (ae.safetensors of FLUX.1)
FLUX_VAE_SCALING = 0.3611
FLUX_VAE_SHIFT = 0.1159


@attrs.frozen(kw_only=True)
class TinyFluxShape:
    """The shape arguments of :func:`build_tiny_flux_pipeline`, checked together before anything is built."""

    #: "dev": guidance embeddings + dynamic shift (FLUX.1-dev, Krea); "schnell": neither
    variant: Literal["dev", "schnell"] = "dev"
    num_layers: int = 1
    num_single_layers: int = 2
    num_attention_heads: int = 2
    attention_head_dim: int = 16
    #: RoPE dims of the (text/index, row, column) axes; they must add up to attention_head_dim
    axes_dims_rope: tuple[int, int, int] = attrs.field(default=(4, 6, 6), converter=tuple)
    latent_channels: int = 16
    #: one entry per VAE stage; the VAE downsamples by 2 ** (len - 1)
    vae_block_out_channels: tuple[int, ...] = attrs.field(default=(8, 16, 16), converter=tuple)
    vae_norm_num_groups: int = 8
    clip_hidden_size: int = 32
    t5_d_model: int = 48
    text_layers: int = 2

    @property
    def vae_scale_factor(self) -> int:
        return 2 ** (len(self.vae_block_out_channels) - 1)

    def check(self) -> None:
        """Raise ConfigError for shapes diffusers would accept but FLUX's forward would break on."""
        if self.variant not in ("dev", "schnell"):
            raise ConfigError(f"variant must be 'dev' or 'schnell', got {self.variant!r}", hint="e.g. variant='dev'")
        if sum(self.axes_dims_rope) != self.attention_head_dim:
            raise ConfigError(
                f"axes_dims_rope {self.axes_dims_rope} must add up to attention_head_dim ({self.attention_head_dim})",
                hint="RoPE rotates every channel of a head, split over the three position axes",
            )
        check_vae_widths(
            self.vae_block_out_channels,
            self.vae_norm_num_groups,
            example="vae_block_out_channels=(8, 16, 16), vae_norm_num_groups=8",
        )


def build_tiny_flux_pipeline(
    path: str | os.PathLike[str],
    *,
    seed: int = 0,
    shape: TinyFluxShape | None = None,
    variant: Literal["dev", "schnell"] | None = None,
    overwrite: bool = False,
    exist_ok: bool = False,
) -> Path:
    """Write a random FluxPipeline to ``path`` and return it.

    ``variant`` overrides ``shape.variant``. Weights depend only on ``seed`` and the shape. An existing ``path`` is
    an error unless ``overwrite`` (replace it) or ``exist_ok`` (keep it, build nothing). The directory appears
    atomically (built beside it, then renamed), so workers racing to build one path all load one whole pipeline.
    """
    shape = shape or TinyFluxShape()
    if variant is not None:
        shape = attrs.evolve(shape, variant=variant)
    shape.check()

    def write(out: Path, scratch: Path) -> None:
        _random_pipeline(shape, seed=seed, tokenizer_dir=scratch / "tokenizers").save_pretrained(
            out, safe_serialization=True
        )
        _add_portable_tokenizer_files(out)

    marker = {
        "builder": "omni_rl_flux.tiny.build_tiny_flux_pipeline",
        "seed": seed,
        "variant": shape.variant,
        "random_weights": True,
    }
    return write_tiny_pipeline(path, write, label="FLUX", marker=marker, overwrite=overwrite, exist_ok=exist_ok)


def _add_portable_tokenizer_files(directory: Path) -> None:
    """Ship what the hub's FLUX repositories ship: CLIP's ``vocab.json`` + ``merges.txt`` (transformers 5 writes
    only ``tokenizer.json``) and ``T5TokenizerFast`` as tokenizer_2's class, so any transformers version loads it."""
    write_clip_vocab_files(directory / "tokenizer")
    name_tokenizer_class(directory, "tokenizer_2", "T5TokenizerFast")


def _random_pipeline(shape: TinyFluxShape, *, seed: int, tokenizer_dir: Path) -> FluxPipeline:
    """Every component with seeded random weights (without touching the caller's global RNG)."""
    from diffusers import FlowMatchEulerDiscreteScheduler, FluxPipeline
    from transformers import CLIPTokenizer, T5TokenizerFast

    write_clip_tokenizer(tokenizer_dir / "clip", pad_token=CLIP_EOS)
    write_t5_tokenizer(tokenizer_dir / "t5")
    scheduler_config = FLUX_DEV_SCHEDULER if shape.variant == "dev" else FLUX_SCHNELL_SCHEDULER
    # one seed per component, so changing one component's shape leaves the others' weights unchanged
    transformer, vae, clip, t5 = seeded_components(
        seed,
        lambda: _transformer(shape),
        lambda: tiny_vae(
            shape.vae_block_out_channels,
            norm_num_groups=shape.vae_norm_num_groups,
            latent_channels=shape.latent_channels,
            sample_size=32,
            scaling_factor=FLUX_VAE_SCALING,
            shift_factor=FLUX_VAE_SHIFT,
        ),
        lambda: _clip(shape),
        lambda: tiny_t5(shape.t5_d_model, shape.text_layers),
    )
    return FluxPipeline(
        transformer=transformer,
        scheduler=FlowMatchEulerDiscreteScheduler(**scheduler_config),
        vae=vae,
        text_encoder=clip,
        tokenizer=CLIPTokenizer.from_pretrained(tokenizer_dir / "clip"),
        text_encoder_2=t5,
        tokenizer_2=T5TokenizerFast.from_pretrained(tokenizer_dir / "t5"),
    )


def _transformer(shape: TinyFluxShape) -> Any:
    from diffusers import FluxTransformer2DModel

    return FluxTransformer2DModel(
        patch_size=1,
        in_channels=4 * shape.latent_channels,
        num_layers=shape.num_layers,
        num_single_layers=shape.num_single_layers,
        attention_head_dim=shape.attention_head_dim,
        num_attention_heads=shape.num_attention_heads,
        joint_attention_dim=shape.t5_d_model,
        pooled_projection_dim=shape.clip_hidden_size,
        guidance_embeds=shape.variant == "dev",
        axes_dims_rope=shape.axes_dims_rope,
    )


def _clip(shape: TinyFluxShape) -> Any:
    from transformers import CLIPTextModel

    # FLUX reads CLIP's pooled output, taken at the first eos token: the tokenizer's <|endoftext|> (the config's eos)
    config = tiny_clip_config(shape.clip_hidden_size, shape.text_layers, hidden_act="quick_gelu")
    return CLIPTextModel(config).eval()
