"""What every tiny-pipeline builder shares: the atomic directory writer, seeded components, and the small CLIP, T5
and VAE pieces several architectures use.

A tiny pipeline is a real diffusers pipeline directory (``save_pretrained`` of every component) with random
weights, written offline, so tests exercise the loading code real weights go through. Each model plugin's
``tiny.py`` builds its own architecture with these (``build_tiny_sd3_pipeline``, ``build_tiny_flux_pipeline``, ...);
:func:`write_tiny_pipeline` publishes the result so that workers racing to build one path all load one complete
pipeline, and marks it with :data:`TINY_MARKER` so nobody mistakes it for real weights.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from omni_rl.errors import ConfigError
from omni_rl_pipelines.tiny_tokenizers import CLIP_BOS, CLIP_EOS, CLIP_MAX_LENGTH, clip_vocab, t5_pieces

if TYPE_CHECKING:  # heavy imports stay inside the builders
    from diffusers import AutoencoderKL
    from transformers import CLIPTextConfig, T5EncoderModel

__all__ = [
    "TINY_MARKER",
    "check_vae_widths",
    "name_tokenizer_class",
    "seeded_components",
    "tiny_clip_config",
    "tiny_latent_stats",
    "tiny_t5",
    "tiny_vae",
    "write_tiny_pipeline",
]

#: Written next to model_index.json so nobody mistakes a tiny pipeline for real weights.
TINY_MARKER = "omni_rl_tiny.json"

T = TypeVar("T")


def write_tiny_pipeline(
    path: str | os.PathLike[str],
    write: Callable[[Path, Path], None],
    *,
    label: str,
    marker: dict[str, Any],
    overwrite: bool,
    exist_ok: bool,
) -> Path:
    """Write a tiny pipeline directory atomically; every model plugin's tiny builder goes through this.

    ``write(out, scratch)`` saves the pipeline into ``out`` (``scratch`` is a folder beside it for temporary
    files); ``marker`` goes to :data:`TINY_MARKER` next to model_index.json. An existing ``path`` is an error
    unless ``overwrite`` (replace it) or ``exist_ok`` (keep it, build nothing). The directory appears atomically
    (built beside it, then renamed), so several workers racing to build the same path all end up loading one
    complete pipeline."""
    target = Path(path).expanduser()
    if target.exists() and exist_ok and not overwrite:
        return target
    if target.exists() and not overwrite:
        raise ConfigError(
            f"cannot write a tiny {label} pipeline to {target}: it already exists",
            hint="choose a new path, or pass overwrite=True to replace it",
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        out = staging / "pipeline"
        write(out, staging)
        (out / TINY_MARKER).write_text(json.dumps(marker, indent=2), encoding="utf-8")
        _publish(out, target, overwrite=overwrite)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _publish(built: Path, target: Path, *, overwrite: bool) -> None:
    """Move the finished directory into place; another builder winning the race is fine (same weights)."""
    if overwrite and target.exists():
        trash = target.with_name(f".{target.name}.old-{uuid.uuid4().hex}")
        target.rename(trash)
        shutil.rmtree(trash, ignore_errors=True)
    try:
        built.rename(target)
    except OSError:
        if not (target / "model_index.json").is_file():
            raise


def seeded_components(seed: int, *builders: Callable[[], T]) -> list[T]:
    """Each builder's component, built right after ``torch.manual_seed(seed * 8 + i)`` for the i-th builder, with
    the caller's global RNG left alone. One seed per component, so changing one component's shape leaves the
    others' weights unchanged; a component a pipeline may lack (SD3's T5, Wan2.2's second expert) comes last."""
    import torch

    components = []
    with torch.random.fork_rng(devices=[]):
        for i, build in enumerate(builders):
            torch.manual_seed(seed * 8 + i)
            components.append(build())
    return components


def name_tokenizer_class(directory: Path, component: str, class_name: str) -> None:
    """Record ``class_name`` as ``component``'s tokenizer class in model_index.json.

    transformers 5 records T5's class as ``T5Tokenizer``, and transformers 4 needs ``T5TokenizerFast`` to read the
    ``tokenizer.json`` it saves; the hub's SD3, FLUX and Wan repositories name ``T5TokenizerFast``, so the tiny
    pipelines do too and load whatever the transformers version."""
    index_path = directory / "model_index.json"
    index = json.loads(index_path.read_text(encoding="utf-8"))
    index[component] = ["transformers", class_name]
    index_path.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def check_vae_widths(block_out_channels: Sequence[int], norm_num_groups: int, *, example: str) -> None:
    """Raise ConfigError unless every VAE block width is a multiple of the group norm's group count (diffusers
    builds such a VAE and fails at its first forward)."""
    if not block_out_channels or any(c % norm_num_groups for c in block_out_channels):
        raise ConfigError(
            f"every VAE block width {tuple(block_out_channels)} must be a multiple of "
            f"vae_norm_num_groups ({norm_num_groups})",
            hint=f"e.g. {example}",
        )


def tiny_vae(
    block_out_channels: tuple[int, ...],
    *,
    norm_num_groups: int,
    latent_channels: int,
    sample_size: int,
    scaling_factor: float,
    shift_factor: float,
) -> AutoencoderKL:
    """A random SD3/FLUX-style ``AutoencoderKL`` (the caller seeds torch)."""
    from diffusers import AutoencoderKL

    blocks = len(block_out_channels)
    return AutoencoderKL(
        in_channels=3,
        out_channels=3,
        down_block_types=("DownEncoderBlock2D",) * blocks,
        up_block_types=("UpDecoderBlock2D",) * blocks,
        block_out_channels=block_out_channels,
        layers_per_block=1,
        latent_channels=latent_channels,
        norm_num_groups=norm_num_groups,
        sample_size=sample_size,
        scaling_factor=scaling_factor,
        shift_factor=shift_factor,
        # SD3's and FLUX's VAEs have no quant convs; keeping that makes the decode path the same as the real one.
        use_quant_conv=False,
        use_post_quant_conv=False,
    )


def tiny_latent_stats(channels: int) -> tuple[list[float], list[float]]:
    """Per-channel latent (mean, std) for the tiny Qwen-Image and Wan VAEs: not 0/1, so a decode that forgets them
    (or applies them backwards) shows."""
    import torch

    return torch.linspace(-0.3, 0.3, channels).tolist(), torch.linspace(0.6, 1.8, channels).tolist()


def tiny_clip_config(hidden: int, layers: int, *, hidden_act: str, projection_dim: int | None = None) -> CLIPTextConfig:
    """The config of a random CLIP text encoder for the offline CLIP tokenizer (SD3's two, FLUX's one)."""
    from transformers import CLIPTextConfig

    vocab = clip_vocab()
    extra = {} if projection_dim is None else {"projection_dim": projection_dim}
    return CLIPTextConfig(
        vocab_size=len(vocab),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        max_position_embeddings=CLIP_MAX_LENGTH,
        hidden_act=hidden_act,
        bos_token_id=vocab[CLIP_BOS],
        # The pooled output is read at the first eos token; it must be the tokenizer's <|endoftext|>.
        eos_token_id=vocab[CLIP_EOS],
        pad_token_id=vocab[CLIP_EOS],
        **extra,
    )


def tiny_t5(d_model: int, layers: int) -> T5EncoderModel:
    """A random T5 encoder for the offline T5 tokenizer (SD3's and FLUX's tiny T5; the caller seeds torch)."""
    from transformers import T5Config, T5EncoderModel

    config = T5Config(
        vocab_size=len(t5_pieces()),
        d_model=d_model,
        d_kv=d_model // 4,
        d_ff=2 * d_model,
        num_layers=layers,
        num_heads=4,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=32,
        feed_forward_proj="gated-gelu",
        dropout_rate=0.0,
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
    )
    return T5EncoderModel(config).eval()
