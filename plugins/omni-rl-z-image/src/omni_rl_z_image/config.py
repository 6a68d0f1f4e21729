"""Options of the ``z_image`` model (``[model] options``).

Kept free of torch/diffusers imports so ``hooks.py`` can hand this class to the registry (which validates the
config file against it) in milliseconds.
"""

from __future__ import annotations

import attrs
from omni_rl_pipelines.options import MemoryOptions, PipelineOptions, lora_rank_option, lora_targets_option

from omni_rl.validators import int_between, non_empty, with_hint

#: LoRA targets of every Z-Image single-stream block (the 30 main layers and the noise/context refiners), matched
#: as dotted-name suffixes: the attention's q/k/v/out and the SwiGLU MLP (w1, w2, w3). The AdaLN modulation linears
#: (``adaLN_modulation.0``) are left out by default; they condition only on the timestep.
DEFAULT_LORA_TARGETS: tuple[str, ...] = (
    "attention.to_q",
    "attention.to_k",
    "attention.to_v",
    "attention.to_out.0",
    "feed_forward.w1",
    "feed_forward.w2",
    "feed_forward.w3",
)

#: ZImagePipeline pads every prompt to max_sequence_length tokens; its default is 512
MAX_SEQUENCE_LENGTH = 1024


def _cfg_truncation(instance: object, attribute: attrs.Attribute, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(
            f"{attribute.name} must be in [0, 1] (CFG is applied while 1 - sigma <= cfg_truncation; 1 = always), "
            f"got {value}"
        )


def _cfg_normalization(instance: object, attribute: attrs.Attribute, value: float) -> None:
    if not value >= 0.0:
        raise ValueError(f"{attribute.name} must be >= 0 (0 = off; e.g. 1.0 caps ||v|| at ||v_pos||), got {value}")


@attrs.frozen(kw_only=True)
class ZImageConfig(MemoryOptions, PipelineOptions):
    """How to load Z-Image and what to train.

    ``path`` is any diffusers ``ZImagePipeline`` directory (Tongyi-MAI/Z-Image, Tongyi-MAI/Z-Image-Turbo and
    fine-tunes), or a hub id where a hub is reachable. LoRA is the default (the reference policy is the base model
    with adapters off); ``lora_rank = 0`` trains every transformer weight. The guidance scale is ZImagePipeline's own
    (``[rollout] options.cfg``): v = v_pos + cfg * (v_pos - v_neg) when cfg > 0, the positive prediction alone at 0
    (Turbo's setting). ``cfg_normalization`` and ``cfg_truncation`` are the pipeline's ``__call__`` arguments of the
    same names.
    """

    #: ZImagePipeline directory (with model_index.json) or hub id
    path: str = attrs.field(
        validator=with_hint(non_empty, "a ZImagePipeline directory or a hub id such as 'Tongyi-MAI/Z-Image'")
    )
    #: the negative prompt of CFG (cfg > 0); ZImagePipeline's default is the empty string
    negative_prompt: str = ""
    #: tokens per prompt (ZImagePipeline's max_sequence_length, default 512; prompts are truncated to it)
    max_sequence_length: int = attrs.field(
        default=512, validator=int_between(1, MAX_SEQUENCE_LENGTH, hint="ZImagePipeline pads prompts to it")
    )
    #: CFG renormalisation: when > 0, the guided velocity's norm is capped at cfg_normalization * ||v_pos|| (per
    #: sample, over all its latents), as ZImagePipeline(cfg_normalization=...); 0 = off (the pipeline's default)
    cfg_normalization: float = attrs.field(default=0.0, converter=float, validator=_cfg_normalization)
    #: CFG truncation: guidance only while 1 - sigma <= cfg_truncation (later steps use v_pos alone), as
    #: ZImagePipeline(cfg_truncation=...); 1 = CFG at every step (the pipeline's default)
    cfg_truncation: float = attrs.field(default=1.0, converter=float, validator=_cfg_truncation)
    #: whether the checkpoint is the few-step distilled Turbo; None = detect it (a path or tiny marker naming
    #: "turbo"). Only ``omni-rl check``'s warning reads it: Turbo trained without KL is known to blur.
    distilled: bool | None = None
    #: LoRA rank; 0 = full fine-tuning of the transformer (no reference view, no LoRA export)
    lora_rank: int = lora_rank_option(32)
    #: modules that get LoRA, matched as dotted-name suffixes (default: attention and MLP of every block)
    lora_target_modules: tuple[str, ...] = lora_targets_option(DEFAULT_LORA_TARGETS)
