"""Options of the ``wan`` model (``[model] options``).

Kept free of torch/diffusers imports so ``hooks.py`` can hand this class to the registry (which validates the
config file against it) in milliseconds.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs
from omni_rl_sd3.config import (
    DTYPES,
    LORA_INITS,
    check_lora_alpha,
    check_lora_rank,
    check_lora_targets,
    check_non_negative,
)
from omni_rl_sd3.speed import SpeedOptions

#: LoRA targets of every Wan transformer block: the q/k/v/out projections of its self-attention (``attn1``) and
#: its text cross-attention (``attn2``), the module set of the Flow-GRPO and DanceGRPO Wan LoRA recipes. The
#: feed-forward (``ffn.net.0.proj``, ``ffn.net.2``) is left out by default; add it to train it too.
DEFAULT_LORA_TARGETS: tuple[str, ...] = ("to_q", "to_k", "to_v", "to_out.0")

#: which experts of a Wan2.2 two-expert pipeline (``transformer_2`` + ``boundary_ratio``) train: the high-noise
#: expert is the pipeline's ``transformer`` (steps with t >= boundary), the low-noise expert its ``transformer_2``
EXPERTS: tuple[str, ...] = ("both", "high_noise", "low_noise")


def _non_empty(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("must be a non-empty path to a WanPipeline directory (or a hub id such as 'Wan-AI/...')")


def _positive(instance: Any, attribute: attrs.Attribute, value: int) -> None:
    if value <= 0:
        raise ValueError(f"must be > 0, got {value!r}")


def _guidance(instance: Any, attribute: attrs.Attribute, value: float | None) -> None:
    if value is not None and not value >= 0:
        raise ValueError(f"must be >= 0 (or left out to use the rollout's cfg), got {value!r}")


@attrs.frozen(kw_only=True)
class WanConfig(SpeedOptions):
    """How to load Wan and what to train.

    ``path`` is any diffusers ``WanPipeline`` directory: Wan2.1 T2V (one transformer) or Wan2.2 (A14B: a
    high-noise ``transformer`` and a low-noise ``transformer_2`` split at ``boundary_ratio``; TI2V-5B: one
    transformer with per-token timesteps), or a hub id where a hub is reachable. LoRA is the default (the reference
    policy is the base model with adapters off); ``lora_rank = 0`` trains every weight of one transformer. The memory
    options are what the 14B experts with the 5.7B UMT5 encoder need: bf16 weights, gradient checkpointing, the text
    encoder and VAE kept on the CPU between uses, each distinct prompt encoded once. The speed options (``compile``,
    ``attention_backend``, ``vae_tiling``, ``vae_slicing``, ``vae_channels_last``, ``cuda_graphs``) are
    :class:`omni_rl_sd3.speed.SpeedOptions`, as for the image models.
    """

    #: WanPipeline directory (with model_index.json) or hub id
    path: str = attrs.field(validator=_non_empty)
    #: weights dtype of every component; LoRA weights are kept in float32 either way (stable optimizer updates)
    dtype: Literal["float32", "bfloat16"] = attrs.field(default="float32", validator=attrs.validators.in_(DTYPES))
    #: the negative prompt of true CFG (guidance_scale > 1); WanPipeline's default is the empty prompt
    negative_prompt: str = ""
    #: UMT5 tokens per prompt, padded with zero embeddings to this length as WanPipeline does (its default 512)
    max_sequence_length: int = attrs.field(default=512, validator=_positive)
    #: CFG scale of the low-noise expert (WanPipeline's ``guidance_scale_2``); left out = the rollout's cfg, as the
    #: pipeline does. Only for two-expert pipelines.
    guidance_scale_2: float | None = attrs.field(default=None, validator=_guidance)
    #: two-expert pipelines: which experts get LoRA and train; the others stay frozen (and are their own reference)
    train_experts: Literal["both", "high_noise", "low_noise"] = attrs.field(
        default="both", validator=attrs.validators.in_(EXPERTS)
    )
    #: LoRA rank; 0 = full fine-tuning of one transformer (no reference view, no LoRA export)
    lora_rank: int = attrs.field(default=32, validator=check_lora_rank)
    #: LoRA alpha (scale = alpha / rank); left out = lora_rank (scale 1)
    lora_alpha: float | None = attrs.field(default=None, validator=check_lora_alpha)
    #: modules that get LoRA, matched as dotted-name suffixes (default: self- and cross-attention of every block)
    lora_target_modules: tuple[str, ...] = attrs.field(
        default=DEFAULT_LORA_TARGETS, converter=tuple, validator=check_lora_targets
    )
    #: LoRA A init: "gaussian" (normal, std 1/rank) or "default" (peft's Kaiming-uniform); B starts at zero
    lora_init: Literal["gaussian", "default"] = attrs.field(
        default="gaussian", validator=attrs.validators.in_(LORA_INITS)
    )
    #: recompute each transformer block's activations in backward (much less memory, ~30% slower training)
    gradient_checkpointing: bool = False
    #: keep the UMT5 text encoder on the CPU, moving it to the device only for prompts not cached yet
    offload_text_encoder: bool = False
    #: keep the VAE on the CPU, moving it to the device only to decode videos
    offload_vae: bool = False
    #: distinct prompts whose embeddings are kept (on the CPU) so a prompt seen again skips the text encoder;
    #: 0 turns the cache off. The negative prompt is always cached.
    prompt_cache_size: int = attrs.field(default=4096, validator=check_non_negative)
    #: when ``path`` does not exist, first write a tiny random Wan2.1-layout pipeline there (tests, examples, CI)
    build_tiny_if_missing: bool = False

    @property
    def effective_lora_alpha(self) -> float:
        """The alpha actually used: ``lora_alpha`` or, when left out, ``lora_rank``."""
        return float(self.lora_rank if self.lora_alpha is None else self.lora_alpha)
