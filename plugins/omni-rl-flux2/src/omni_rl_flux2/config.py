"""Options of the ``flux2_klein`` model (``[model] options``).

Kept free of torch/diffusers imports so ``hooks.py`` can hand this class to the registry (which validates the
config file against it) in milliseconds.

Guidance is the protocol's (``[rollout] cfg``), applied as ``Flux2KleinPipeline`` applies its ``guidance_scale``:
classic CFG over the prompt and the negative prompt (two transformer rows per step) when it is above 1 on a base
variant (``is_distilled = false`` in model_index.json: FLUX.2-klein-base-4B/9B); the step-distilled variants
(FLUX.2-klein-4B/9B, ``is_distilled = true``) ignore it, as the pipeline does, so one row per step.
"""

from __future__ import annotations

import attrs
from omni_rl_pipelines.options import JOINT_ATTENTION_TARGETS, MemoryOptions, PipelineOptions, lora_targets_option

from omni_rl.validators import int_between, non_empty, with_hint

#: LoRA targets, matched as dotted-name suffixes. Double-stream blocks: joint attention (image q/k/v/out and text
#: ``add_*`` q/k/v/out) and both streams' MLPs (``linear_in`` / ``linear_out``); single-stream blocks: the fused
#: q/k/v + MLP input ``attn.to_qkv_mlp_proj``. The single blocks' output ``attn.to_out`` is left out because its
#: suffix also names the double blocks' ``to_out`` ModuleList (add it as a full name to train it). The shared AdaLN
#: modulation linears condition on the timestep only and are left out.
DEFAULT_LORA_TARGETS: tuple[str, ...] = (
    *JOINT_ATTENTION_TARGETS,
    "ff.linear_in",
    "ff.linear_out",
    "ff_context.linear_in",
    "ff_context.linear_out",
    "attn.to_qkv_mlp_proj",
)

#: Flux2KleinPipeline's tokenizer_max_length: every prompt is padded to max_sequence_length tokens, at most this
MAX_SEQUENCE_LENGTH = 512


@attrs.frozen(kw_only=True)
class Flux2KleinConfig(MemoryOptions, PipelineOptions):
    """How to load FLUX.2-klein and what to train.

    ``path`` is any diffusers ``Flux2KleinPipeline`` directory (FLUX.2-klein-base-4B/9B, the step-distilled
    FLUX.2-klein-4B/9B, fine-tunes of that layout), or a hub id where a hub is reachable. LoRA is the default (the
    reference policy is the base model with adapters off); ``lora_rank = 0`` trains every transformer weight. The
    dtype, LoRA, memory (``offload_text_encoders``: the Qwen3 encoder, 4B or 8B), speed and
    ``build_tiny_if_missing`` options are omni-rl-pipelines'.
    """

    #: Flux2KleinPipeline directory (with model_index.json) or hub id
    path: str = attrs.field(
        validator=with_hint(
            non_empty, "a Flux2KleinPipeline directory or a hub id such as 'black-forest-labs/FLUX.2-klein-base-4B'"
        )
    )
    #: negative prompt of classic CFG (base variants with [rollout] cfg > 1); the pipeline's own is ""
    negative_prompt: str = ""
    #: Qwen3 tokens per prompt (every prompt is padded to it, as the pipeline does)
    max_sequence_length: int = attrs.field(
        default=MAX_SEQUENCE_LENGTH,
        validator=int_between(1, MAX_SEQUENCE_LENGTH, hint="Flux2KleinPipeline's tokenizer_max_length"),
    )
    #: modules that get LoRA, matched as dotted-name suffixes (default: attention and MLPs of both block kinds)
    lora_target_modules: tuple[str, ...] = lora_targets_option(DEFAULT_LORA_TARGETS)
