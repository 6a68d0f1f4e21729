"""Write tiny random Flux2KleinPipeline directories for tests, examples and CPU benchmarks.

The directory is a real diffusers pipeline (``save_pretrained`` of every component, the real classes:
``Flux2Transformer2DModel``, ``AutoencoderKLFlux2``, ``Qwen3ForCausalLM``, a Qwen2 tokenizer with Qwen3's chat
template built offline by :mod:`omni_rl_pipelines.tiny_qwen3`, ``FlowMatchEulerDiscreteScheduler``), so tests
exercise the loading code real weights go through, and ``Flux2KleinPipeline.from_pretrained(path)`` runs it end to
end offline. It keeps what matters for correctness: latents 2x2-patchified on channels and normalised by the VAE's
batch-norm statistics (random, not the identity), double- and single-stream blocks, 4-axis RoPE over text and image
ids, 27 text-encoder layers so the pipeline's hidden-state layers 9/18/27 exist, and ``is_distilled`` either way
(``variant = "distilled"``: FLUX.2-klein-4B/9B; ``"base"``: FLUX.2-klein-base-4B/9B).

Defaults: one double and two single blocks, a 4x VAE, 32x32 px images (16 image tokens), ~1 MB.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import attrs
from omni_rl_pipelines.tiny import TINY_MARKER, check_vae_widths, seeded_components, write_tiny_pipeline
from omni_rl_pipelines.tiny_qwen3 import ENDOFTEXT, IM_END, qwen3_vocab, write_qwen3_tokenizer

from omni_rl.errors import ConfigError

if TYPE_CHECKING:
    from diffusers import Flux2KleinPipeline

__all__ = ["TINY_MARKER", "TinyFlux2KleinShape", "build_tiny_flux2_klein_pipeline"]

#: black-forest-labs/FLUX.2-klein's scheduler_config.json (the pipeline computes mu itself)
FLUX2_SCHEDULER: dict[str, Any] = {
    "base_image_seq_len": 256,
    "base_shift": 0.5,
    "max_image_seq_len": 4096,
    "max_shift": 1.15,
    "num_train_timesteps": 1000,
    "shift": 3.0,
    "time_shift_type": "exponential",
    "use_dynamic_shifting": True,
}
#: the pipeline reads the text encoder's hidden states 9, 18 and 27
TEXT_LAYERS = 27


@attrs.frozen(kw_only=True)
class TinyFlux2KleinShape:
    """The shape arguments of :func:`build_tiny_flux2_klein_pipeline`, checked together before anything is built."""

    #: "distilled": is_distilled (no CFG); "base": CFG as the pipeline applies it
    variant: Literal["distilled", "base"] = "base"
    num_layers: int = 1
    num_single_layers: int = 2
    num_attention_heads: int = 2
    attention_head_dim: int = 16
    #: RoPE dims of the (T, H, W, L) axes; they must add up to attention_head_dim
    axes_dims_rope: tuple[int, int, int, int] = attrs.field(default=(4, 4, 4, 4), converter=tuple)
    latent_channels: int = 8
    #: one entry per VAE stage; the VAE downsamples by 2 ** (len - 1)
    vae_block_out_channels: tuple[int, ...] = attrs.field(default=(8, 16, 16), converter=tuple)
    vae_norm_num_groups: int = 8
    text_hidden_size: int = 16

    def check(self) -> None:
        """Raise ConfigError for shapes diffusers would accept but FLUX.2's forward would break on."""
        if self.variant not in ("distilled", "base"):
            raise ConfigError(f"variant must be 'distilled' or 'base', got {self.variant!r}", hint="e.g. 'base'")
        if len(self.axes_dims_rope) != 4 or sum(self.axes_dims_rope) != self.attention_head_dim:
            raise ConfigError(
                f"axes_dims_rope {self.axes_dims_rope} must be 4 dims adding up to attention_head_dim "
                f"({self.attention_head_dim})",
                hint="RoPE rotates every channel of a head, split over the (T, H, W, L) axes",
            )
        check_vae_widths(
            self.vae_block_out_channels,
            self.vae_norm_num_groups,
            example="vae_block_out_channels=(8, 16, 16), vae_norm_num_groups=8",
        )


def build_tiny_flux2_klein_pipeline(
    path: str | os.PathLike[str],
    *,
    seed: int = 0,
    shape: TinyFlux2KleinShape | None = None,
    variant: Literal["distilled", "base"] | None = None,
    overwrite: bool = False,
    exist_ok: bool = False,
) -> Path:
    """Write a random Flux2KleinPipeline to ``path`` and return it.

    ``variant`` overrides ``shape.variant``. Weights depend only on ``seed`` and the shape. An existing ``path`` is
    an error unless ``overwrite`` (replace it) or ``exist_ok`` (keep it, build nothing). The directory appears
    atomically, so workers racing to build one path all load one whole pipeline.
    """
    shape = shape or TinyFlux2KleinShape()
    if variant is not None:
        shape = attrs.evolve(shape, variant=variant)
    shape.check()

    def write(out: Path, scratch: Path) -> None:
        _random_pipeline(shape, seed=seed, tokenizer_dir=scratch / "tokenizer").save_pretrained(
            out, safe_serialization=True
        )

    marker = {
        "builder": "omni_rl_flux2.tiny.build_tiny_flux2_klein_pipeline",
        "seed": seed,
        "variant": shape.variant,
        "random_weights": True,
    }
    return write_tiny_pipeline(path, write, label="FLUX.2-klein", marker=marker, overwrite=overwrite, exist_ok=exist_ok)


def _random_pipeline(shape: TinyFlux2KleinShape, *, seed: int, tokenizer_dir: Path) -> Flux2KleinPipeline:
    """Every component with seeded random weights (without touching the caller's global RNG)."""
    from diffusers import FlowMatchEulerDiscreteScheduler, Flux2KleinPipeline
    from transformers import AutoTokenizer

    write_qwen3_tokenizer(tokenizer_dir, extra_files=("chat_template.jinja",))
    transformer, vae, text_encoder = seeded_components(
        seed, lambda: _transformer(shape), lambda: _vae(shape), lambda: _text_encoder(shape)
    )
    return Flux2KleinPipeline(
        transformer=transformer,
        scheduler=FlowMatchEulerDiscreteScheduler(**FLUX2_SCHEDULER),
        vae=vae,
        text_encoder=text_encoder,
        tokenizer=AutoTokenizer.from_pretrained(tokenizer_dir),
        is_distilled=shape.variant == "distilled",
    )


def _transformer(shape: TinyFlux2KleinShape) -> Any:
    from diffusers import Flux2Transformer2DModel

    return Flux2Transformer2DModel(
        patch_size=1,
        in_channels=4 * shape.latent_channels,
        num_layers=shape.num_layers,
        num_single_layers=shape.num_single_layers,
        attention_head_dim=shape.attention_head_dim,
        num_attention_heads=shape.num_attention_heads,
        joint_attention_dim=3 * shape.text_hidden_size,
        timestep_guidance_channels=32,
        axes_dims_rope=shape.axes_dims_rope,
        guidance_embeds=False,
    )


def _vae(shape: TinyFlux2KleinShape) -> Any:
    """AutoencoderKLFlux2 with random batch-norm running statistics, so the pipeline's (de)normalisation is not the
    identity in the tests."""
    import torch
    from diffusers import AutoencoderKLFlux2

    stages = len(shape.vae_block_out_channels)
    vae = AutoencoderKLFlux2(
        block_out_channels=shape.vae_block_out_channels,
        down_block_types=("DownEncoderBlock2D",) * stages,
        up_block_types=("UpDecoderBlock2D",) * stages,
        layers_per_block=1,
        latent_channels=shape.latent_channels,
        norm_num_groups=shape.vae_norm_num_groups,
        sample_size=32,
    )
    with torch.no_grad():
        vae.bn.running_mean.copy_(torch.randn_like(vae.bn.running_mean) * 0.1)
        vae.bn.running_var.copy_(torch.rand_like(vae.bn.running_var) + 0.5)
    return vae.eval()


def _text_encoder(shape: TinyFlux2KleinShape) -> Any:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    ids = qwen3_vocab()
    config = Qwen3Config(
        vocab_size=len(ids),
        hidden_size=shape.text_hidden_size,
        intermediate_size=2 * shape.text_hidden_size,
        num_hidden_layers=TEXT_LAYERS,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=8,
        max_position_embeddings=1024,
        bos_token_id=ids[ENDOFTEXT],
        eos_token_id=ids[IM_END],
        pad_token_id=ids[ENDOFTEXT],
        tie_word_embeddings=True,
    )
    return Qwen3ForCausalLM(config).eval()
