"""Options of the ``sd3`` model (``[model] options``).

Kept free of torch/diffusers imports so ``hooks.py`` can hand this class to the registry (which validates the
config file against it) in milliseconds.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from omni_rl_sd3.speed import SpeedOptions

#: LoRA targets of the SD3 joint-attention blocks: image-stream q/k/v/out and text-stream (``add_*``) q/k/v/out.
#: This is the list Flow-GRPO trains on SD3.5-Medium, so results are comparable to its reference scripts. The
#: ``attn.`` prefix keeps SD3.5-Medium's extra image self-attention (``attn2``) frozen, as Flow-GRPO does; add
#: ``"attn2.to_q"`` etc. to train it too. peft matches a target as a dotted-name suffix.
DEFAULT_LORA_TARGETS: tuple[str, ...] = (
    "attn.add_k_proj",
    "attn.add_q_proj",
    "attn.add_v_proj",
    "attn.to_add_out",
    "attn.to_k",
    "attn.to_out.0",
    "attn.to_q",
    "attn.to_v",
)

DTYPES: tuple[str, ...] = ("float32", "bfloat16")
LORA_INITS: tuple[str, ...] = ("default", "gaussian")


def _non_empty(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(
            "must be a non-empty path to a StableDiffusion3Pipeline directory (or a hub id such as "
            "'stabilityai/stable-diffusion-3.5-medium')"
        )


# The LoRA option checks every diffusers model adapter shares (FLUX and Qwen-Image import them).


def check_non_negative(instance: Any, attribute: attrs.Attribute, value: int) -> None:
    if value < 0:
        raise ValueError(f"must be >= 0, got {value!r}")


def check_lora_rank(instance: Any, attribute: attrs.Attribute, value: int) -> None:
    if value < 0:
        raise ValueError(f"must be >= 0 (0 = full fine-tuning of the transformer), got {value!r}")


def check_lora_alpha(instance: Any, attribute: attrs.Attribute, value: float | None) -> None:
    if value is not None and not value > 0:
        raise ValueError(f"must be > 0 (or left out to default to lora_rank), got {value!r}")


def check_lora_targets(instance: Any, attribute: attrs.Attribute, value: tuple[str, ...]) -> None:
    if not value:
        raise ValueError("must name at least one module (e.g. 'attn.to_q'); the default targets the attention")
    for name in value:
        if not isinstance(name, str) or not name.strip() or name != name.strip():
            raise ValueError(f"module names must be non-empty strings without spaces, got {name!r}")


def _positive(instance: Any, attribute: attrs.Attribute, value: float) -> None:
    if value <= 0:
        raise ValueError(f"must be > 0, got {value!r}")


@attrs.frozen(kw_only=True)
class SD3Config(SpeedOptions):
    """How to load Stable Diffusion 3 / 3.5 and what to train.

    ``path`` is any diffusers ``StableDiffusion3Pipeline`` directory (SD3-Medium, SD3.5-Medium, SD3.5-Large
    layouts), or a hub id where a hub is reachable. LoRA is the default because RL fine-tuning keeps a reference
    policy (adapters off) for free; ``lora_rank = 0`` trains every transformer weight instead.
    """

    #: StableDiffusion3Pipeline directory (with model_index.json) or hub id
    path: str = attrs.field(validator=_non_empty)
    #: weights dtype of every component; LoRA weights are kept in float32 either way (stable optimizer updates)
    dtype: Literal["float32", "bfloat16"] = attrs.field(default="float32", validator=attrs.validators.in_(DTYPES))
    #: load and use T5; when false (or the pipeline has no text_encoder_3) T5 embeddings are zeros, as diffusers
    use_t5: bool = True
    #: T5 tokens per prompt (diffusers' default 256; SD3 was trained with up to 256, SD3.5 with 256)
    max_sequence_length: int = attrs.field(default=256, validator=_positive)
    #: LoRA rank; 0 = full fine-tuning of the transformer (no reference view, no LoRA export)
    lora_rank: int = attrs.field(default=32, validator=check_lora_rank)
    #: LoRA alpha (scale = alpha / rank); left out = lora_rank (scale 1). Flow-GRPO uses rank 32, alpha 64
    lora_alpha: float | None = attrs.field(default=None, validator=check_lora_alpha)
    #: modules that get LoRA, matched as dotted-name suffixes (default: SD3 joint attention, as Flow-GRPO)
    lora_target_modules: tuple[str, ...] = attrs.field(
        default=DEFAULT_LORA_TARGETS, converter=tuple, validator=check_lora_targets
    )
    #: LoRA A init: "gaussian" (normal, std 1/rank; Flow-GRPO's) or "default" (peft's Kaiming-uniform); B is
    #: zero either way, so the policy starts exactly at the base model
    lora_init: Literal["gaussian", "default"] = attrs.field(
        default="gaussian", validator=attrs.validators.in_(LORA_INITS)
    )
    #: recompute transformer activations in backward (less memory, ~30% slower training)
    gradient_checkpointing: bool = False
    #: when ``path`` does not exist, first write a tiny random SD3 pipeline there (tests, examples, CI)
    build_tiny_if_missing: bool = False

    @property
    def effective_lora_alpha(self) -> float:
        """The alpha actually used: ``lora_alpha`` or, when left out, ``lora_rank``."""
        return float(self.lora_rank if self.lora_alpha is None else self.lora_alpha)
