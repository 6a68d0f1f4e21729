"""Options of the ``qwen_image`` model (``[model] options``).

Kept free of torch/diffusers imports so ``hooks.py`` can hand this class to the registry (which validates the
config file against it) in milliseconds.
"""

from __future__ import annotations

import attrs
from omni_rl_pipelines.options import (
    JOINT_ATTENTION_TARGETS,
    MemoryOptions,
    PipelineOptions,
    lora_rank_option,
    lora_targets_option,
)

from omni_rl.validators import int_between, non_empty, with_hint

#: LoRA targets of every Qwen-Image dual-stream block, matched as dotted-name suffixes: joint attention (image
#: q/k/v/out and text ``add_*`` q/k/v/out) and both streams' MLPs. This is the module set DiffSynth-Studio's and
#: Flow-GRPO's Qwen-Image LoRA recipes train. The AdaLN modulation linears (``img_mod.1``, ``txt_mod.1``) are
#: left out by default: they are 6x wider than the others (a third of the block's weights) and condition only on
#: the timestep; add them to train them too.
DEFAULT_LORA_TARGETS: tuple[str, ...] = (
    *JOINT_ATTENTION_TARGETS,
    "img_mlp.net.0.proj",
    "img_mlp.net.2",
    "txt_mlp.net.0.proj",
    "txt_mlp.net.2",
)

#: QwenImagePipeline's limit on text tokens after the template is dropped
MAX_SEQUENCE_LENGTH = 1024


@attrs.frozen(kw_only=True)
class QwenImageConfig(MemoryOptions, PipelineOptions):
    """How to load Qwen-Image and what to train.

    ``path`` is any diffusers ``QwenImagePipeline`` directory (Qwen/Qwen-Image and fine-tunes of it), or a hub id
    where a hub is reachable. LoRA is the default (the reference policy is the base model with adapters off);
    ``lora_rank = 0`` trains every transformer weight. The memory options are what a 20B transformer with a 7B
    text encoder needs on one GPU: bf16 weights, gradient checkpointing, the text encoder (Qwen2.5-VL) and VAE kept
    on the CPU between uses, and each distinct prompt encoded once. The dtype, LoRA, memory, speed and
    ``build_tiny_if_missing`` options are omni-rl-pipelines' (:class:`~omni_rl_pipelines.options.PipelineOptions`,
    :class:`~omni_rl_pipelines.options.MemoryOptions`); ``offload_text_encoder``, this model's name for
    ``offload_text_encoders`` until omni-rl 0.1, is still read (with a warning) until 0.2.
    """

    #: QwenImagePipeline directory (with model_index.json) or hub id
    path: str = attrs.field(
        validator=with_hint(non_empty, "a QwenImagePipeline directory or a hub id such as 'Qwen/Qwen-Image'")
    )
    #: the negative prompt of true CFG (guidance_scale > 1); Qwen-Image's model card uses " "
    negative_prompt: str = " "
    #: text tokens per prompt after the template is dropped (QwenImagePipeline's max_sequence_length, default 512)
    max_sequence_length: int = attrs.field(
        default=512, validator=int_between(1, MAX_SEQUENCE_LENGTH, hint="QwenImagePipeline's limit")
    )
    #: LoRA rank; 0 = full fine-tuning of the transformer (no reference view, no LoRA export)
    lora_rank: int = lora_rank_option(64)
    #: modules that get LoRA, matched as dotted-name suffixes (default: attention and MLPs of every block)
    lora_target_modules: tuple[str, ...] = lora_targets_option(DEFAULT_LORA_TARGETS)
