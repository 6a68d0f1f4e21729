"""The options every diffusers model adapter shares, as attrs bases its ``[model] options`` class combines.

- :class:`LoraOptions`: what trains (LoRA of a rank, alpha, targets and init, or the whole transformer with
  ``lora_rank = 0``) and gradient checkpointing;
- :class:`MemoryOptions`: text encoders and VAE kept on the CPU between uses, and the prompt-embedding cache
  (the models whose text encoders are billions of weights: FLUX, Qwen-Image, Wan);
- :class:`~omni_rl_pipelines.speed.SpeedOptions`: ``compile``, ``attention_backend``, the VAE options and
  ``cuda_graphs``;
- :class:`PipelineOptions`: the LoRA and speed options plus ``dtype`` and ``build_tiny_if_missing``, the base of
  every model config (SD3's is ``PipelineOptions`` with SD3's own options, FLUX's adds ``MemoryOptions``).

A model config is ``@attrs.frozen(kw_only=True) class FluxConfig(MemoryOptions, PipelineOptions)`` with its
``path``, its own options and its LoRA target list (:func:`lora_targets_option`); the option names, defaults and
error paths (``$.model.options.lora_rank``) are the same in every model. The bases are not slotted, so they combine
(two slotted bases would not); the model config itself is.

Torch-free, so a plugin's ``config.py`` (which ``hooks.py`` hands to the registry) still imports in milliseconds.
"""

from __future__ import annotations

import warnings
from typing import Any, Literal

import attrs

from omni_rl.validators import int_at_least, non_negative_int, optional_positive_finite, with_hint
from omni_rl_pipelines.speed import SpeedOptions

#: LoRA targets of a joint (MM-DiT) attention block, in diffusers' module names: the image stream's q/k/v/out and
#: the text stream's (``add_*``) q/k/v/out. FLUX's double-stream and Qwen-Image's blocks start their default lists
#: with it (peft matches each as a dotted-name suffix)
JOINT_ATTENTION_TARGETS: tuple[str, ...] = (
    "attn.to_q",
    "attn.to_k",
    "attn.to_v",
    "attn.to_out.0",
    "attn.add_q_proj",
    "attn.add_k_proj",
    "attn.add_v_proj",
    "attn.to_add_out",
)

DTYPES: tuple[str, ...] = ("float32", "bfloat16")
LORA_INITS: tuple[str, ...] = ("default", "gaussian")

#: ``lora_rank``: an integer >= 0 (bools refused), 0 meaning full fine-tuning
check_lora_rank = int_at_least(0, hint="0 = full fine-tuning of the transformer")
#: ``lora_alpha``: a finite number > 0, or left out
check_lora_alpha = with_hint(optional_positive_finite, "left out = lora_rank (LoRA scale 1)")
#: a count that may be 0 (``prompt_cache_size``)
check_non_negative = non_negative_int


def check_lora_targets(instance: Any, attribute: attrs.Attribute, value: tuple[str, ...]) -> None:
    """At least one module name, each a non-empty string without surrounding spaces (peft matches them as
    dotted-name suffixes, so ``" attn.to_q"`` would silently match nothing)."""
    if not value:
        raise ValueError(
            f"{attribute.name} must name at least one module (e.g. 'attn.to_q'); the default targets the attention"
        )
    for name in value:
        if not isinstance(name, str) or not name.strip() or name != name.strip():
            raise ValueError(f"{attribute.name}: module names must be non-empty strings without spaces, got {name!r}")


def lora_targets_option(default: tuple[str, ...]) -> Any:
    """The ``lora_target_modules`` field with a model's own default target list (the rest of the field is shared)."""
    return attrs.field(default=default, converter=tuple, validator=check_lora_targets)


def lora_rank_option(default: int) -> Any:
    """The ``lora_rank`` field with a model's own default rank (32 unless the model redefines it)."""
    return attrs.field(default=default, validator=check_lora_rank)


@attrs.frozen(kw_only=True, slots=False)
class LoraOptions:
    """What trains: LoRA on the transformer (the reference policy is the base model with adapters off) or, with
    ``lora_rank = 0``, every transformer weight. A model config sets ``lora_target_modules`` with
    :func:`lora_targets_option` (its default list names that architecture's modules)."""

    #: LoRA rank; 0 = full fine-tuning of the transformer (no reference view, no LoRA export)
    lora_rank: int = lora_rank_option(32)
    #: LoRA alpha (scale = alpha / rank); left out = lora_rank (scale 1). Flow-GRPO uses rank 32, alpha 64
    lora_alpha: float | None = attrs.field(default=None, validator=check_lora_alpha)
    #: modules that get LoRA, matched as dotted-name suffixes (each model's default targets its attention)
    lora_target_modules: tuple[str, ...] = attrs.field(converter=tuple, validator=check_lora_targets)
    #: LoRA A init: "gaussian" (normal, std 1/rank; Flow-GRPO's) or "default" (peft's Kaiming-uniform); B starts
    #: at zero either way, so the policy starts exactly at the base model
    lora_init: Literal["gaussian", "default"] = attrs.field(
        default="gaussian", validator=attrs.validators.in_(LORA_INITS)
    )
    #: recompute each transformer block's activations in backward (much less memory, ~30% slower training)
    gradient_checkpointing: bool = False

    @property
    def effective_lora_alpha(self) -> float:
        """The alpha actually used: ``lora_alpha`` or, when left out, ``lora_rank``."""
        return float(self.lora_rank if self.lora_alpha is None else self.lora_alpha)


@attrs.frozen(kw_only=True, slots=False)
class PipelineOptions(LoraOptions, SpeedOptions):
    """The options of every diffusers model adapter besides its ``path`` and its own: the weights' dtype, what
    trains (:class:`LoraOptions`), the speed options and the tiny pipeline for examples and tests."""

    #: weights dtype of every component; LoRA weights are kept in float32 either way (stable optimizer updates)
    dtype: Literal["float32", "bfloat16"] = attrs.field(default="float32", validator=attrs.validators.in_(DTYPES))
    #: when ``path`` does not exist, first write a tiny random pipeline of this model there (tests, examples, CI)
    build_tiny_if_missing: bool = False


#: the spelling of ``offload_text_encoders`` that Qwen-Image and Wan used until omni-rl 0.1 (read until 0.2)
DEPRECATED_OFFLOAD_KEY = "offload_text_encoder"


@attrs.frozen(kw_only=True, slots=False)
class MemoryOptions:
    """What keeps a model with billions of text-encoder weights on one GPU: the text encoders and the VAE on the CPU
    between uses, and each distinct prompt encoded once (its embeddings cached on the CPU).

    ``offload_text_encoder`` (Qwen-Image's and Wan's name until omni-rl 0.1) is read for one release: it warns
    (FutureWarning, shown to users) and sets ``offload_text_encoders``; the instance then holds only the new name, so
    the run directory's resolved config is written with it."""

    #: keep every text encoder on the CPU, moving them to the device only to encode prompts that are not cached yet
    offload_text_encoders: bool = False
    #: keep the VAE on the CPU, moving it to the device only to decode or encode images
    offload_vae: bool = False
    #: distinct prompts whose embeddings are kept (on the CPU) so a prompt seen again skips the text encoders;
    #: 0 turns the cache off. The negative prompt is always cached.
    prompt_cache_size: int = attrs.field(default=4096, validator=check_non_negative)
    #: deprecated spelling of ``offload_text_encoders`` (removed in omni-rl 0.2); None once read
    offload_text_encoder: bool | None = attrs.field(default=None, repr=False)

    def __attrs_post_init__(self) -> None:
        old = self.offload_text_encoder
        if old is None:
            return
        if old != self.offload_text_encoders and self.offload_text_encoders:
            raise ValueError(
                f"{DEPRECATED_OFFLOAD_KEY} = {str(old).lower()} contradicts offload_text_encoders = true; keep only "
                "offload_text_encoders (the new name of the same option)"
            )
        warnings.warn(
            f"[model] options.{DEPRECATED_OFFLOAD_KEY} is deprecated and read as offload_text_encoders (all text "
            "encoders of the pipeline): rename it in the config (the old name is removed in omni-rl 0.2)",
            FutureWarning,
            stacklevel=3,
        )
        object.__setattr__(self, "offload_text_encoders", old)
        object.__setattr__(self, DEPRECATED_OFFLOAD_KEY, None)
