"""Options of the ``flux`` model (``[model] options``).

Kept free of torch/diffusers imports so ``hooks.py`` can hand this class to the registry (which validates the
config file against it) in milliseconds.

Two guidance knobs, one per FluxPipeline argument, so a recipe reads the same here as in diffusers:

* ``guidance`` (this section) is FluxPipeline's ``guidance_scale``: the value a guidance-distilled transformer
  (FLUX.1-dev, Krea: ``guidance_embeds = true``) takes as an embedding. One transformer call per step. Left out it
  is 3.5 on such a transformer; a transformer without guidance embeddings (schnell) refuses it.
* ``[rollout] cfg`` (the protocol's ``guidance_scale``) is FluxPipeline's ``true_cfg_scale``: above 1 it runs
  classic CFG with ``negative_prompt``, twice the transformer rows per step, identically in rollout and
  recompute. Keep it at 1 for guidance-distilled models unless you mean to pay for both.
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

#: LoRA targets, matched as dotted-name suffixes. Double-stream blocks: joint attention (image q/k/v/out and text
#: ``add_*`` q/k/v/out) and both streams' MLPs; single-stream blocks: q/k/v (``attn.to_*`` again), the MLP input
#: ``proj_mlp`` and the fused attention+MLP output ``proj_out``. This is the module set of the diffusers FLUX LoRA
#: recipes extended to the single blocks (38 of FLUX's 57 blocks). Note that peft's suffix match makes ``proj_out``
#: also hit the transformer's final output projection. AdaLN modulation linears (``norm1.linear``, ``norm.linear``)
#: are left out: they condition on the timestep and pooled text only.
DEFAULT_LORA_TARGETS: tuple[str, ...] = (
    "attn.to_q",
    "attn.to_k",
    "attn.to_v",
    "attn.to_out.0",
    "attn.add_q_proj",
    "attn.add_k_proj",
    "attn.add_v_proj",
    "attn.to_add_out",
    "ff.net.0.proj",
    "ff.net.2",
    "ff_context.net.0.proj",
    "ff_context.net.2",
    "proj_mlp",
    "proj_out",
)

#: FluxPipeline refuses more T5 tokens than this
MAX_SEQUENCE_LENGTH = 512
#: FluxPipeline's default ``guidance_scale``, used for guidance-distilled transformers when ``guidance`` is left out
DEFAULT_GUIDANCE = 3.5


def _non_empty(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(
            "must be a non-empty path to a FluxPipeline directory (or a hub id such as 'black-forest-labs/FLUX.1-dev')"
        )


def _sequence_length(instance: Any, attribute: attrs.Attribute, value: int) -> None:
    if not 0 < value <= MAX_SEQUENCE_LENGTH:
        raise ValueError(f"must be in 1..{MAX_SEQUENCE_LENGTH} (FluxPipeline's limit), got {value!r}")


def _optional_non_negative(instance: Any, attribute: attrs.Attribute, value: float | None) -> None:
    if value is not None and not value >= 0:
        raise ValueError(f"must be >= 0 (or left out: 3.5 on guidance-distilled models), got {value!r}")


@attrs.frozen(kw_only=True)
class FluxConfig(SpeedOptions):
    """How to load FLUX.1 and what to train.

    ``path`` is any diffusers ``FluxPipeline`` directory (FLUX.1-dev, FLUX.1-schnell, FLUX.1-Krea-dev and
    fine-tunes of that layout), or a hub id where a hub is reachable. LoRA is the default (the reference policy is
    the base model with adapters off); ``lora_rank = 0`` trains every transformer weight.
    """

    #: FluxPipeline directory (with model_index.json) or hub id
    path: str = attrs.field(validator=_non_empty)
    #: weights dtype of every component; LoRA weights are kept in float32 either way (stable optimizer updates)
    dtype: Literal["float32", "bfloat16"] = attrs.field(default="float32", validator=attrs.validators.in_(DTYPES))
    #: distilled guidance embedded in the transformer (FluxPipeline's guidance_scale); left out = 3.5 when the
    #: transformer has guidance embeddings (dev, Krea), none otherwise (schnell, which refuses a value)
    guidance: float | None = attrs.field(default=None, validator=_optional_non_negative)
    #: negative prompt of classic CFG (used only when [rollout] cfg > 1, FluxPipeline's true_cfg_scale)
    negative_prompt: str = ""
    #: T5 tokens per prompt (every prompt is padded to it, as the pipeline does): 512 for dev, 256 for schnell
    max_sequence_length: int = attrs.field(default=512, validator=_sequence_length)
    #: LoRA rank; 0 = full fine-tuning of the transformer (no reference view, no LoRA export)
    lora_rank: int = attrs.field(default=32, validator=check_lora_rank)
    #: LoRA alpha (scale = alpha / rank); left out = lora_rank (scale 1)
    lora_alpha: float | None = attrs.field(default=None, validator=check_lora_alpha)
    #: modules that get LoRA, matched as dotted-name suffixes (default: attention and MLPs of both block kinds)
    lora_target_modules: tuple[str, ...] = attrs.field(
        default=DEFAULT_LORA_TARGETS, converter=tuple, validator=check_lora_targets
    )
    #: LoRA A init: "gaussian" (normal, std 1/rank) or "default" (peft's Kaiming-uniform); B starts at zero
    lora_init: Literal["gaussian", "default"] = attrs.field(
        default="gaussian", validator=attrs.validators.in_(LORA_INITS)
    )
    #: recompute each transformer block's activations in backward (much less memory, ~30% slower training)
    gradient_checkpointing: bool = False
    #: keep CLIP and T5 (4.7B for the real model) on the CPU, moving them to the device only to encode prompts
    #: that are not cached yet
    offload_text_encoders: bool = False
    #: keep the VAE on the CPU, moving it to the device only to decode or encode images
    offload_vae: bool = False
    #: distinct prompts whose embeddings are kept (on the CPU) so a prompt seen again skips the text encoders;
    #: 0 turns the cache off. The negative prompt is always cached.
    prompt_cache_size: int = attrs.field(default=4096, validator=check_non_negative)
    #: when ``path`` does not exist, first write a tiny random FLUX.1-dev-like pipeline there (tests, examples)
    build_tiny_if_missing: bool = False

    @property
    def effective_lora_alpha(self) -> float:
        """The alpha actually used: ``lora_alpha`` or, when left out, ``lora_rank``."""
        return float(self.lora_rank if self.lora_alpha is None else self.lora_alpha)
