"""Options of the ``sd3`` model (``[model] options``).

Kept free of torch/diffusers imports so ``hooks.py`` can hand this class to the registry (which validates the
config file against it) in milliseconds. The dtype, LoRA and speed options are omni-rl-pipelines' shared bases
(:class:`~omni_rl_pipelines.options.PipelineOptions`), the same in every diffusers model.
"""

from __future__ import annotations

from typing import Any

import attrs
from omni_rl_pipelines.options import PipelineOptions, lora_targets_option

from omni_rl.validators import non_empty, positive_int, with_hint
from omni_rl_sd3._moved import moved_name

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

#: names of this module until omni-rl-sd3 0.1.0 that are omni-rl-pipelines' now (read with a warning until 0.2)
_MOVED = dict.fromkeys(
    ("DTYPES", "LORA_INITS", "check_lora_alpha", "check_lora_rank", "check_lora_targets", "check_non_negative"),
    "omni_rl_pipelines.options",
)


def __getattr__(name: str) -> Any:
    return moved_name(__name__, name, _MOVED)


@attrs.frozen(kw_only=True)
class SD3Config(PipelineOptions):
    """How to load Stable Diffusion 3 / 3.5 and what to train.

    ``path`` is any diffusers ``StableDiffusion3Pipeline`` directory (SD3-Medium, SD3.5-Medium, SD3.5-Large
    layouts), or a hub id where a hub is reachable. LoRA is the default because RL fine-tuning keeps a reference
    policy (adapters off) for free; ``lora_rank = 0`` trains every transformer weight instead. The dtype, LoRA,
    gradient checkpointing, speed and ``build_tiny_if_missing`` options are
    :class:`~omni_rl_pipelines.options.PipelineOptions`.
    """

    #: StableDiffusion3Pipeline directory (with model_index.json) or hub id
    path: str = attrs.field(
        validator=with_hint(
            non_empty,
            "a StableDiffusion3Pipeline directory or a hub id such as 'stabilityai/stable-diffusion-3.5-medium'",
        )
    )
    #: load and use T5; when false (or the pipeline has no text_encoder_3) T5 embeddings are zeros, as diffusers
    use_t5: bool = True
    #: T5 tokens per prompt (diffusers' default 256; SD3 was trained with up to 256, SD3.5 with 256)
    max_sequence_length: int = attrs.field(default=256, validator=positive_int)
    #: modules that get LoRA, matched as dotted-name suffixes (default: SD3 joint attention, as Flow-GRPO)
    lora_target_modules: tuple[str, ...] = lora_targets_option(DEFAULT_LORA_TARGETS)
