"""Options of the ``qwen_image21`` model (``[model] options``).

Kept free of torch/diffusers imports so ``hooks.py`` can hand this class to the registry (which validates the
config file against it) in milliseconds.
"""

from __future__ import annotations

import attrs
from omni_rl_pipelines.options import MemoryOptions, PipelineOptions, lora_rank_option, lora_targets_option

from omni_rl.validators import non_empty, with_hint

#: LoRA targets of every Qwen-Image 2.1 single-stream block, matched as dotted-name suffixes: the attention's
#: q/k/v/out and the SwiGLU MLP (proj, gate_layer, out). The blocks hold no modulation weights of their own (one
#: shared ``modulation`` feeds them all), so there is nothing per block to leave out.
DEFAULT_LORA_TARGETS: tuple[str, ...] = (
    "attn.to_q",
    "attn.to_k",
    "attn.to_v",
    "attn.to_out.0",
    "img_mlp.proj",
    "img_mlp.gate_layer",
    "img_mlp.out",
)


@attrs.frozen(kw_only=True)
class QwenImage21Config(MemoryOptions, PipelineOptions):
    """How to load Qwen-Image 2.1 and what to train.

    ``path`` is any diffusers ``QwenImage21Pipeline`` directory (Qwen/Qwen-Image-2.1 and fine-tunes), or a hub id
    where a hub is reachable. LoRA is the default (the reference policy is the base model with adapters off);
    ``lora_rank = 0`` trains every transformer weight. Guidance is the pipeline's ``true_cfg_scale``
    (``[rollout] options.cfg``): neg + cfg (pos - neg) when cfg > 1, the positive prediction alone otherwise, which
    is how Qwen-Image 2.1 is meant to be sampled (the pipeline's default of 1). The sigma grid is the checkpoint's
    ``sample_sigmas`` when it publishes one of the rollout's step count, else linspace(1, 1/n, n), through the
    scheduler's resolution-dependent shift.
    """

    #: QwenImage21Pipeline directory (with model_index.json) or hub id
    path: str = attrs.field(
        validator=with_hint(non_empty, "a QwenImage21Pipeline directory or a hub id such as 'Qwen/Qwen-Image-2.1'")
    )
    #: the negative prompt of true CFG (cfg > 1); the pipeline has no default, Qwen-Image's model cards use " "
    negative_prompt: str = " "
    #: LoRA rank; 0 = full fine-tuning of the transformer (no reference view, no LoRA export)
    lora_rank: int = lora_rank_option(64)
    #: modules that get LoRA, matched as dotted-name suffixes (default: attention and MLP of every block)
    lora_target_modules: tuple[str, ...] = lora_targets_option(DEFAULT_LORA_TARGETS)
