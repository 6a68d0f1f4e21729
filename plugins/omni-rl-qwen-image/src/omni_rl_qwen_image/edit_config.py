"""Options of the ``qwen_image_edit`` and ``qwen_image_edit_plus`` models (``[model] options``).

Torch-free, like :mod:`omni_rl_qwen_image.config`, so ``hooks.py`` hands it to the registry in milliseconds.
"""

from __future__ import annotations

import attrs
from omni_rl_pipelines.options import MemoryOptions, PipelineOptions, lora_rank_option, lora_targets_option

from omni_rl.validators import int_at_least, non_empty, with_hint
from omni_rl_qwen_image.config import DEFAULT_LORA_TARGETS

#: the edit pipelines' condition size for the VAE copy (``calculate_dimensions(1024 * 1024, ratio)``; Plus:
#: ``VAE_IMAGE_SIZE``) and Plus's for the VLM copy (``CONDITION_IMAGE_SIZE``)
PIPELINE_CONDITION_AREA = 1024 * 1024
PLUS_VLM_CONDITION_AREA = 384 * 384
#: the smallest area either copy may be sized to: one 32 x 32 block (the pipelines round sides to 32)
MIN_CONDITION_AREA = 32 * 32


@attrs.frozen(kw_only=True)
class QwenImageEditConfig(MemoryOptions, PipelineOptions):
    """How to load Qwen-Image-Edit (``QwenImageEditPipeline``) or Qwen-Image-Edit-2509/2511
    (``QwenImageEditPlusPipeline``), how to size the condition images, and what to train.

    Each condition image is resized as the pipeline's ``calculate_dimensions`` does (aspect kept, sides rounded to
    multiples of 32) to about ``condition_max_area`` pixels for the VAE (the condition tokens: the pipeline's 1024 x
    1024 by default, 4096 tokens, 4x a 512 x 512 target's; smaller areas make each step cheaper) and to about
    ``vlm_condition_max_area`` for the Qwen2.5-VL prompt encoder. The dtype, LoRA, memory, speed and
    ``build_tiny_if_missing`` options are omni-rl-pipelines' (as ``qwen_image``'s); ``prompt_cache_size`` counts
    (prompt, condition images) pairs.
    """

    #: QwenImageEditPipeline / QwenImageEditPlusPipeline directory (with model_index.json) or hub id
    path: str = attrs.field(
        validator=with_hint(
            non_empty, "a QwenImageEdit(Plus)Pipeline directory or a hub id such as 'Qwen/Qwen-Image-Edit-2511'"
        )
    )
    #: the negative prompt of true CFG (guidance_scale > 1), encoded with the same condition images; the model
    #: cards use " "
    negative_prompt: str = " "
    #: about how many pixels the VAE copy of each condition image has (sides multiples of 32, aspect kept)
    condition_max_area: int = attrs.field(
        default=PIPELINE_CONDITION_AREA,
        validator=int_at_least(MIN_CONDITION_AREA, hint="the pipelines use 1024 * 1024; 512 * 512 is 4x cheaper"),
    )
    #: about how many pixels the Qwen2.5-VL copy has; left out = the pipeline's: Qwen-Image-Edit encodes the VAE
    #: copy itself, Qwen-Image-Edit-Plus a 384 x 384-area copy
    vlm_condition_max_area: int | None = attrs.field(
        default=None,
        validator=attrs.validators.optional(
            int_at_least(MIN_CONDITION_AREA, hint="left out = the pipeline's (Plus: 384 * 384)")
        ),
    )
    #: LoRA rank; 0 = full fine-tuning of the transformer (no reference view, no LoRA export)
    lora_rank: int = lora_rank_option(64)
    #: modules that get LoRA, matched as dotted-name suffixes (default: attention and MLPs of every block)
    lora_target_modules: tuple[str, ...] = lora_targets_option(DEFAULT_LORA_TARGETS)
