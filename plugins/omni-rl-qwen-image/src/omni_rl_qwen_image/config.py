"""Options of the ``qwen_image`` model (``[model] options``).

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

#: LoRA targets of every Qwen-Image dual-stream block, matched as dotted-name suffixes: joint attention (image
#: q/k/v/out and text ``add_*`` q/k/v/out) and both streams' MLPs. This is the module set DiffSynth-Studio's and
#: Flow-GRPO's Qwen-Image LoRA recipes train. The AdaLN modulation linears (``img_mod.1``, ``txt_mod.1``) are
#: left out by default: they are 6x wider than the others (a third of the block's weights) and condition only on
#: the timestep; add them to train them too.
DEFAULT_LORA_TARGETS: tuple[str, ...] = (
    "attn.to_q",
    "attn.to_k",
    "attn.to_v",
    "attn.to_out.0",
    "attn.add_q_proj",
    "attn.add_k_proj",
    "attn.add_v_proj",
    "attn.to_add_out",
    "img_mlp.net.0.proj",
    "img_mlp.net.2",
    "txt_mlp.net.0.proj",
    "txt_mlp.net.2",
)

#: QwenImagePipeline's limit on text tokens after the template is dropped
MAX_SEQUENCE_LENGTH = 1024


def _non_empty(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(
            "must be a non-empty path to a QwenImagePipeline directory (or a hub id such as 'Qwen/Qwen-Image')"
        )


def _sequence_length(instance: Any, attribute: attrs.Attribute, value: int) -> None:
    if not 0 < value <= MAX_SEQUENCE_LENGTH:
        raise ValueError(f"must be in 1..{MAX_SEQUENCE_LENGTH} (QwenImagePipeline's limit), got {value!r}")


@attrs.frozen(kw_only=True)
class QwenImageConfig(SpeedOptions):
    """How to load Qwen-Image and what to train.

    ``path`` is any diffusers ``QwenImagePipeline`` directory (Qwen/Qwen-Image and fine-tunes of it), or a hub id
    where a hub is reachable. LoRA is the default (the reference policy is the base model with adapters off);
    ``lora_rank = 0`` trains every transformer weight. The memory options are what a 20B transformer with a 7B
    text encoder needs on one GPU: bf16 weights, gradient checkpointing, the text encoder and VAE kept on the CPU
    between uses, and each distinct prompt encoded once.
    """

    #: QwenImagePipeline directory (with model_index.json) or hub id
    path: str = attrs.field(validator=_non_empty)
    #: weights dtype of every component; LoRA weights are kept in float32 either way (stable optimizer updates)
    dtype: Literal["float32", "bfloat16"] = attrs.field(default="float32", validator=attrs.validators.in_(DTYPES))
    #: the negative prompt of true CFG (guidance_scale > 1); Qwen-Image's model card uses " "
    negative_prompt: str = " "
    #: text tokens per prompt after the template is dropped (QwenImagePipeline's max_sequence_length, default 512)
    max_sequence_length: int = attrs.field(default=512, validator=_sequence_length)
    #: LoRA rank; 0 = full fine-tuning of the transformer (no reference view, no LoRA export)
    lora_rank: int = attrs.field(default=64, validator=check_lora_rank)
    #: LoRA alpha (scale = alpha / rank); left out = lora_rank (scale 1)
    lora_alpha: float | None = attrs.field(default=None, validator=check_lora_alpha)
    #: modules that get LoRA, matched as dotted-name suffixes (default: attention and MLPs of every block)
    lora_target_modules: tuple[str, ...] = attrs.field(
        default=DEFAULT_LORA_TARGETS, converter=tuple, validator=check_lora_targets
    )
    #: LoRA A init: "gaussian" (normal, std 1/rank) or "default" (peft's Kaiming-uniform); B starts at zero
    lora_init: Literal["gaussian", "default"] = attrs.field(
        default="gaussian", validator=attrs.validators.in_(LORA_INITS)
    )
    #: recompute each transformer block's activations in backward (much less memory, ~30% slower training)
    gradient_checkpointing: bool = False
    #: keep the text encoder (Qwen2.5-VL, 7B for the real model) on the CPU, moving it to the device only to
    #: encode prompts that are not cached yet
    offload_text_encoder: bool = False
    #: keep the VAE on the CPU, moving it to the device only to decode or encode images
    offload_vae: bool = False
    #: distinct prompts whose embeddings are kept (on the CPU) so a prompt seen again skips the text encoder;
    #: 0 turns the cache off. The negative prompt is always cached.
    prompt_cache_size: int = attrs.field(default=4096, validator=check_non_negative)
    #: when ``path`` does not exist, first write a tiny random Qwen-Image pipeline there (tests, examples, CI)
    build_tiny_if_missing: bool = False

    @property
    def effective_lora_alpha(self) -> float:
        """The alpha actually used: ``lora_alpha`` or, when left out, ``lora_rank``."""
        return float(self.lora_rank if self.lora_alpha is None else self.lora_alpha)
