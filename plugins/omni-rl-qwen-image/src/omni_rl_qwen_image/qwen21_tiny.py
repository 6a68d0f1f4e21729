"""Write tiny random Qwen-Image 2.1 pipelines (``QwenImage21Pipeline``) offline, for tests and examples.

The directory is what the hub's Qwen-Image 2.1 repository holds, with random weights and the real classes:
``transformer`` (``QwenImage21Transformer2DModel``: single-stream block-causal blocks, ``causal_condition``),
``vae`` (``AutoencoderKLQwenImage21``: RGBA in and out, 16x spatial compression as the pipeline assumes, per-channel
latent statistics that are not 0/1), ``text_encoder`` (``Qwen3VLForConditionalGeneration`` with a one-block vision
tower), ``scheduler`` and a ``processor`` folder (the tokenizer files, named ``Qwen3VLProcessor`` in
``model_index.json``). The tokenizer is omni-rl-pipelines' offline Qwen3 one with Qwen3-VL's vision tokens
(:mod:`omni_rl_pipelines.tiny_qwen3`). ``sample_sigmas`` optionally records a default sigma grid in the pipeline's
config, as the published checkpoint may.

Defaults: 2 blocks, 16 latent channels, 64 x 64 px images (4 x 4 latents, 16 image tokens).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import attrs
from omni_rl_pipelines.tiny import seeded_components, tiny_latent_stats, write_tiny_pipeline
from omni_rl_pipelines.tiny_qwen3 import ENDOFTEXT, IM_END, VISION_TOKENS, qwen3_vocab, write_qwen3_tokenizer

from omni_rl.errors import ConfigError
from omni_rl_qwen_image.qwen21_loading import PROCESSOR_ENTRY, PROCESSOR_FOLDER
from omni_rl_qwen_image.qwen21_prompts import TextProcessor
from omni_rl_qwen_image.tiny import QWEN_IMAGE_SCHEDULER

__all__ = ["TinyQwenImage21Shape", "build_tiny_qwen_image21_pipeline"]

#: Qwen3-VL's tokenizer limit
TOKENIZER_MAX_LENGTH = 262144


@attrs.frozen(kw_only=True)
class TinyQwenImage21Shape:
    """The shape arguments of :func:`build_tiny_qwen_image21_pipeline`, checked together before anything is built."""

    num_layers: int = 2
    num_attention_heads: int = 2
    attention_head_dim: int = 16
    #: RoPE dims of the (frame, height, width) axes; they must add up to attention_head_dim
    axes_dims_rope: tuple[int, int, int] = attrs.field(default=(8, 4, 4), converter=tuple)
    latent_channels: int = 16
    vae_base_dim: int = 8
    text_hidden_size: int = 32
    text_layers: int = 2

    def check(self) -> None:
        if sum(self.axes_dims_rope) != self.attention_head_dim or any(d % 2 for d in self.axes_dims_rope):
            raise ConfigError(
                f"axes_dims_rope {self.axes_dims_rope} must be even and add up to attention_head_dim "
                f"({self.attention_head_dim})",
                hint="e.g. (8, 4, 4) with attention_head_dim 16",
            )


def build_tiny_qwen_image21_pipeline(
    path: str | os.PathLike[str],
    *,
    seed: int = 0,
    shape: TinyQwenImage21Shape | None = None,
    sample_sigmas: tuple[float, ...] | None = None,
    overwrite: bool = False,
    exist_ok: bool = False,
) -> Path:
    """Write a random ``QwenImage21Pipeline`` to ``path`` and return it (atomically: workers racing to build one
    path all load one complete pipeline). An existing ``path`` is an error unless ``overwrite`` or ``exist_ok``."""
    shape = shape or TinyQwenImage21Shape()
    shape.check()

    def write(out: Path, scratch: Path) -> None:
        pipeline = random_pipeline(shape, seed=seed, sample_sigmas=sample_sigmas, scratch=scratch)
        pipeline.register_modules(processor=None)  # the stand-in is not saved; the folder is written below
        pipeline.save_pretrained(out, safe_serialization=True)
        write_processor(out / PROCESSOR_FOLDER)
        index_path = out / "model_index.json"
        index = json.loads(index_path.read_text(encoding="utf-8"))
        index[PROCESSOR_FOLDER] = PROCESSOR_ENTRY
        index_path.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n", encoding="utf-8")

    marker = {
        "builder": "omni_rl_qwen_image.qwen21_tiny.build_tiny_qwen_image21_pipeline",
        "seed": seed,
        "shape": attrs.asdict(shape),
        "sample_sigmas": None if sample_sigmas is None else list(sample_sigmas),
        "random_weights": True,
    }
    return write_tiny_pipeline(
        path, write, label="Qwen-Image 2.1", marker=marker, overwrite=overwrite, exist_ok=exist_ok
    )


def write_processor(directory: Path) -> None:
    """The ``processor`` folder: the tokenizer files and a ``preprocessor_config.json`` (Qwen3-VL's patch 16,
    merge 2), so that where torchvision is installed transformers' own ``Qwen3VLProcessor`` loads it too."""
    write_qwen3_tokenizer(directory, vision=True, model_max_length=TOKENIZER_MAX_LENGTH)
    config = {
        "image_processor_type": "Qwen2VLImageProcessor",
        "processor_class": "Qwen3VLProcessor",
        "patch_size": 16,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "size": {"shortest_edge": 64 * 64, "longest_edge": 256 * 256},
    }
    (directory / "preprocessor_config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")


def random_pipeline(
    shape: TinyQwenImage21Shape, *, seed: int, sample_sigmas: tuple[float, ...] | None, scratch: Path
) -> Any:
    """Every component with seeded random weights (the caller's global RNG is left alone)."""
    from diffusers import FlowMatchEulerDiscreteScheduler, QwenImage21Pipeline

    write_qwen3_tokenizer(scratch / "tokenizer", vision=True, model_max_length=TOKENIZER_MAX_LENGTH)
    transformer, vae, text_encoder = seeded_components(
        seed, lambda: _transformer(shape), lambda: _vae(shape), lambda: _text_encoder(shape)
    )
    return QwenImage21Pipeline(
        transformer=transformer,
        vae=vae,
        text_encoder=text_encoder,
        processor=TextProcessor.from_pretrained(scratch / "tokenizer"),
        scheduler=FlowMatchEulerDiscreteScheduler.from_config(QWEN_IMAGE_SCHEDULER),
        sample_sigmas=None if sample_sigmas is None else list(sample_sigmas),
    )


def _transformer(shape: TinyQwenImage21Shape) -> Any:
    import torch
    from diffusers import QwenImage21Transformer2DModel

    transformer = QwenImage21Transformer2DModel(
        in_channels=shape.latent_channels,
        out_channels=shape.latent_channels,
        num_layers=shape.num_layers,
        attention_head_dim=shape.attention_head_dim,
        num_attention_heads=shape.num_attention_heads,
        context_in_dim=shape.text_hidden_size,
        axes_dims_rope=shape.axes_dims_rope,
    )
    # the zero-centred text norm stores scale - 1: random, so a norm applied wrongly shows
    with torch.no_grad():
        transformer.txt_in.text_norm.weight.normal_(0.0, 0.1)
    return transformer.eval()


def _vae(shape: TinyQwenImage21Shape) -> Any:
    from diffusers import AutoencoderKLQwenImage21

    mean, std = tiny_latent_stats(shape.latent_channels)
    return AutoencoderKLQwenImage21(
        base_dim=shape.vae_base_dim,
        decoder_base_dim=shape.vae_base_dim,
        z_dim=shape.latent_channels,
        dim_mult=[1, 1, 1, 1, 1],  # four 2x downsamples: the 16x the pipeline assumes
        num_res_blocks=1,
        temperal_downsample=[False, False, False, False],
        latents_mean=mean,
        latents_std=std,
    ).eval()


def _text_encoder(shape: TinyQwenImage21Shape) -> Any:
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    ids = qwen3_vocab(vision=True)
    hidden, heads = shape.text_hidden_size, 2
    head_dim = hidden // heads
    text = {
        "vocab_size": len(ids),
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "num_hidden_layers": shape.text_layers,
        "num_attention_heads": heads,
        "num_key_value_heads": 1,
        "head_dim": head_dim,
        "max_position_embeddings": 4096,
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": 5_000_000.0,
            "mrope_section": [head_dim // 4, head_dim // 8, head_dim // 8],
            "mrope_interleaved": True,
        },
        "pad_token_id": ids[ENDOFTEXT],
        "eos_token_id": ids[IM_END],
    }
    vision = {
        "depth": 1,
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "num_heads": heads,
        "out_hidden_size": hidden,
        "patch_size": 16,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "num_position_embeddings": 64,
        "deepstack_visual_indexes": [0],
    }
    vision_start, _, _, image_pad, video_pad = (ids[t] for t in VISION_TOKENS)
    config = Qwen3VLConfig(
        text_config=text,
        vision_config=vision,
        image_token_id=image_pad,
        video_token_id=video_pad,
        vision_start_token_id=vision_start,
        vision_end_token_id=ids[VISION_TOKENS[1]],
        tie_word_embeddings=False,
    )
    return Qwen3VLForConditionalGeneration(config).eval()
