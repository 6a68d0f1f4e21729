"""Write tiny random StableDiffusion3Pipeline directories for tests, examples and CPU benchmarks.

The directory is a real diffusers pipeline (``save_pretrained`` of every component), so tests exercise the same
loading code as SD3-Medium / SD3.5 weights: ``StableDiffusion3Pipeline.from_pretrained(path)`` works offline
and runs end to end. It keeps SD3's structure where it matters for correctness: 16 latent channels, patch size
2, two CLIP encoders of different widths (so a concat-order bug shows), a T5 encoder wider than both CLIPs
together, VAE scaling and shift factors that are not 1 and 0, and the shift-3 flow-matching scheduler.

Defaults: 2 transformer layers, 32x32 latents (256 image tokens), a 2x VAE, so 64x64 px images, ~4 MB on disk.
A mid-size benchmark model: ``num_layers=8, num_attention_heads=8, attention_head_dim=32`` (same 256 tokens).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from omni_rl_pipelines import tiny as kit
from omni_rl_pipelines.tiny_tokenizers import (
    CLIP_PADS,
    write_clip_tokenizer,
    write_clip_vocab_files,
    write_t5_tokenizer,
)

from omni_rl.errors import ConfigError
from omni_rl_sd3._moved import moved_name

if TYPE_CHECKING:  # heavy imports stay inside the builders
    from diffusers import FlowMatchEulerDiscreteScheduler, SD3Transformer2DModel, StableDiffusion3Pipeline
    from transformers import CLIPTextModelWithProjection

#: names of this module until omni-rl-sd3 0.1.0 that are omni-rl-pipelines' now (read with a warning until 0.2;
#: the kit is imported as a module, so they are reached only through ``__getattr__``)
_MOVED = dict.fromkeys(("TINY_MARKER", "tiny_t5", "tiny_vae", "write_tiny_pipeline"), "omni_rl_pipelines.tiny")


def __getattr__(name: str) -> Any:
    return moved_name(__name__, name, _MOVED)


@attrs.frozen(kw_only=True)
class TinySD3Shape:
    """The shape arguments of :func:`build_tiny_sd3_pipeline`, checked together before anything is built."""

    num_layers: int
    sample_size: int
    patch_size: int
    num_attention_heads: int
    attention_head_dim: int
    latent_channels: int
    vae_block_out_channels: tuple[int, ...] = attrs.field(converter=tuple)
    vae_norm_num_groups: int
    clip_hidden_sizes: tuple[int, ...] = attrs.field(converter=tuple)
    t5_d_model: int
    text_layers: int
    qk_norm: str | None
    dual_attention_layers: tuple[int, ...] = attrs.field(converter=tuple)
    shift: float
    scaling_factor: float
    shift_factor: float
    use_t5: bool

    @property
    def vae_scale_factor(self) -> int:
        return 2 ** (len(self.vae_block_out_channels) - 1)

    def check(self) -> None:
        """Raise ConfigError for shapes that diffusers would accept but SD3's encode path would break on."""
        if len(self.clip_hidden_sizes) != 2:
            raise ConfigError(
                f"clip_hidden_sizes must have two entries, got {self.clip_hidden_sizes!r}", hint="e.g. (32, 48)"
            )
        if sum(self.clip_hidden_sizes) > self.t5_d_model:
            raise ConfigError(
                f"t5_d_model ({self.t5_d_model}) must be >= the two CLIP widths together "
                f"({sum(self.clip_hidden_sizes)})",
                hint="SD3 zero-pads the concatenated CLIP embeddings to the T5 width; widen t5_d_model",
            )
        kit.check_vae_widths(
            self.vae_block_out_channels,
            self.vae_norm_num_groups,
            example="vae_block_out_channels=(32, 32), vae_norm_num_groups=8",
        )
        if self.text_layers < 2:
            raise ConfigError(
                f"text_layers must be >= 2, got {self.text_layers}",
                hint="SD3 reads the penultimate CLIP layer, so one layer would feed it the token embeddings",
            )
        if self.sample_size % self.patch_size:
            raise ConfigError(
                f"sample_size ({self.sample_size}) must be a multiple of patch_size ({self.patch_size})",
                hint="the transformer cuts latents into patch_size x patch_size tokens",
            )


def build_tiny_sd3_pipeline(
    path: str | os.PathLike[str],
    *,
    seed: int = 0,
    num_layers: int = 2,
    sample_size: int = 32,
    patch_size: int = 2,
    num_attention_heads: int = 4,
    attention_head_dim: int = 16,
    latent_channels: int = 16,
    vae_block_out_channels: Sequence[int] = (32, 32),
    vae_norm_num_groups: int = 8,
    clip_hidden_sizes: tuple[int, int] = (32, 48),
    t5_d_model: int = 96,
    text_layers: int = 2,
    qk_norm: str | None = None,
    dual_attention_layers: Sequence[int] = (),
    shift: float = 3.0,
    scaling_factor: float = 1.5305,
    shift_factor: float = 0.0609,
    use_t5: bool = True,
    overwrite: bool = False,
    exist_ok: bool = False,
) -> Path:
    """Write a random StableDiffusion3Pipeline to ``path`` and return it.

    ``sample_size`` is the default latent size; images are ``sample_size * 2 ** (len(vae_block_out_channels)
    - 1)`` px (64 with the defaults). Weights depend only on ``seed`` and the shape arguments. ``qk_norm =
    "rms_norm"`` with ``dual_attention_layers = (0,)`` gives the SD3.5-Medium block layout. ``use_t5 = False``
    writes a pipeline without T5 (``text_encoder_3`` null), which diffusers runs with zero T5 embeddings.

    An existing ``path`` is an error unless ``overwrite`` (replace it) or ``exist_ok`` (keep it, build nothing).
    The directory appears atomically (built beside it, then renamed), so several workers racing to build the
    same path all end up loading one complete pipeline.
    """
    shape = TinySD3Shape(
        num_layers=num_layers,
        sample_size=sample_size,
        patch_size=patch_size,
        num_attention_heads=num_attention_heads,
        attention_head_dim=attention_head_dim,
        latent_channels=latent_channels,
        vae_block_out_channels=vae_block_out_channels,
        vae_norm_num_groups=vae_norm_num_groups,
        clip_hidden_sizes=clip_hidden_sizes,
        t5_d_model=t5_d_model,
        text_layers=text_layers,
        qk_norm=qk_norm,
        dual_attention_layers=dual_attention_layers,
        shift=shift,
        scaling_factor=scaling_factor,
        shift_factor=shift_factor,
        use_t5=use_t5,
    )
    shape.check()

    def write(out: Path, scratch: Path) -> None:
        _random_pipeline(shape, seed=seed, tokenizer_dir=scratch / "tokenizers").save_pretrained(
            out, safe_serialization=True
        )
        _add_portable_tokenizer_files(out, use_t5=shape.use_t5)

    marker = {"builder": "omni_rl_sd3.tiny.build_tiny_sd3_pipeline", "seed": seed, "random_weights": True}
    return kit.write_tiny_pipeline(path, write, label="SD3", marker=marker, overwrite=overwrite, exist_ok=exist_ok)


def _add_portable_tokenizer_files(directory: Path, *, use_t5: bool) -> None:
    """Make the tokenizers load the way the real SD3 repositories do, whatever the transformers version.

    transformers 5 saves only ``tokenizer.json`` and records T5's class as ``T5Tokenizer``; transformers 4 reads
    a slow ``CLIPTokenizer`` from ``vocab.json`` + ``merges.txt`` and needs ``T5TokenizerFast`` to read
    ``tokenizer.json``. The hub's SD3 repositories ship both files and name ``T5TokenizerFast``, so we do too.
    """
    for name in ("tokenizer", "tokenizer_2"):
        write_clip_vocab_files(directory / name)
    if use_t5:
        kit.name_tokenizer_class(directory, "tokenizer_3", "T5TokenizerFast")


def _random_pipeline(shape: TinySD3Shape, *, seed: int, tokenizer_dir: Path) -> StableDiffusion3Pipeline:
    """Build every component with seeded random weights (without touching the caller's global RNG)."""
    from diffusers import StableDiffusion3Pipeline
    from transformers import CLIPTokenizer, T5TokenizerFast

    tokenizers = []
    for i, pad in enumerate(CLIP_PADS):
        write_clip_tokenizer(tokenizer_dir / f"clip_{i}", pad_token=pad)
        tokenizers.append(CLIPTokenizer.from_pretrained(tokenizer_dir / f"clip_{i}"))
    tokenizer_3 = None
    if shape.use_t5:
        write_t5_tokenizer(tokenizer_dir / "t5")
        tokenizer_3 = T5TokenizerFast.from_pretrained(tokenizer_dir / "t5")

    # one seed per component (transformer, VAE, the two CLIPs, T5), so changing one component's shape leaves the
    # others' weights unchanged
    builders: list[Any] = [
        lambda: _transformer(shape),
        lambda: kit.tiny_vae(
            shape.vae_block_out_channels,
            norm_num_groups=shape.vae_norm_num_groups,
            latent_channels=shape.latent_channels,
            sample_size=shape.sample_size * shape.vae_scale_factor,
            scaling_factor=shape.scaling_factor,
            shift_factor=shape.shift_factor,
        ),
        *(lambda hidden=hidden: _clip(hidden, shape.text_layers) for hidden in shape.clip_hidden_sizes),
    ]
    if shape.use_t5:
        builders.append(lambda: kit.tiny_t5(shape.t5_d_model, shape.text_layers))
    transformer, vae, *encoders = kit.seeded_components(seed, *builders)
    text_encoder_3 = encoders.pop() if shape.use_t5 else None
    return StableDiffusion3Pipeline(
        transformer=transformer,
        scheduler=_scheduler(shape.shift),
        vae=vae,
        text_encoder=encoders[0],
        tokenizer=tokenizers[0],
        text_encoder_2=encoders[1],
        tokenizer_2=tokenizers[1],
        text_encoder_3=text_encoder_3,
        tokenizer_3=tokenizer_3,
    )


def _transformer(shape: TinySD3Shape) -> SD3Transformer2DModel:
    from diffusers import SD3Transformer2DModel

    return SD3Transformer2DModel(
        sample_size=shape.sample_size,
        patch_size=shape.patch_size,
        in_channels=shape.latent_channels,
        out_channels=shape.latent_channels,
        num_layers=shape.num_layers,
        attention_head_dim=shape.attention_head_dim,
        num_attention_heads=shape.num_attention_heads,
        joint_attention_dim=shape.t5_d_model,
        caption_projection_dim=shape.num_attention_heads * shape.attention_head_dim,
        pooled_projection_dim=sum(shape.clip_hidden_sizes),
        # Room for images up to twice the default size, like SD3's 192-patch table at 1024 px.
        pos_embed_max_size=2 * (shape.sample_size // shape.patch_size),
        dual_attention_layers=shape.dual_attention_layers,
        qk_norm=shape.qk_norm,
    )


def _clip(hidden: int, layers: int) -> CLIPTextModelWithProjection:
    from transformers import CLIPTextModelWithProjection

    config = kit.tiny_clip_config(hidden, layers, hidden_act="gelu", projection_dim=hidden)
    return CLIPTextModelWithProjection(config).eval()


def _scheduler(shift: float) -> FlowMatchEulerDiscreteScheduler:
    from diffusers import FlowMatchEulerDiscreteScheduler

    return FlowMatchEulerDiscreteScheduler(num_train_timesteps=1000, shift=shift)
