"""Options of the ``wan`` model (``[model] options``).

Kept free of torch/diffusers imports so ``hooks.py`` can hand this class to the registry (which validates the
config file against it) in milliseconds.
"""

from __future__ import annotations

from typing import Literal

import attrs
from omni_rl_pipelines.options import MemoryOptions, PipelineOptions, lora_targets_option

from omni_rl.validators import non_empty, non_negative_finite, non_negative_int, positive_int, with_hint

#: LoRA targets of every Wan transformer block: the q/k/v/out projections of its self-attention (``attn1``) and
#: its text cross-attention (``attn2``), the module set of the Flow-GRPO and DanceGRPO Wan LoRA recipes. The
#: feed-forward (``ffn.net.0.proj``, ``ffn.net.2``) is left out by default; add it to train it too.
DEFAULT_LORA_TARGETS: tuple[str, ...] = ("to_q", "to_k", "to_v", "to_out.0")

#: which experts of a Wan2.2 two-expert pipeline (``transformer_2`` + ``boundary_ratio``) train: the high-noise
#: expert is the pipeline's ``transformer`` (steps with t >= boundary), the low-noise expert its ``transformer_2``
EXPERTS: tuple[str, ...] = ("both", "high_noise", "low_noise")


@attrs.frozen(kw_only=True)
class WanConfig(MemoryOptions, PipelineOptions):
    """How to load Wan and what to train.

    ``path`` is any diffusers ``WanPipeline`` directory: Wan2.1 T2V (one transformer) or Wan2.2 (A14B: a
    high-noise ``transformer`` and a low-noise ``transformer_2`` split at ``boundary_ratio``; TI2V-5B: one
    transformer with per-token timesteps), or a hub id where a hub is reachable. LoRA is the default (the reference
    policy is the base model with adapters off); ``lora_rank = 0`` trains every weight of one transformer. The memory
    options are what the 14B experts with the 5.7B UMT5 encoder need: bf16 weights, gradient checkpointing, the text
    encoder and VAE kept on the CPU between uses, each distinct prompt encoded once. The dtype, LoRA, memory, speed
    and ``build_tiny_if_missing`` options are omni-rl-pipelines' (:class:`~omni_rl_pipelines.options.PipelineOptions`,
    :class:`~omni_rl_pipelines.options.MemoryOptions`), as for the image models; ``offload_text_encoder``, this
    model's name for ``offload_text_encoders`` until omni-rl 0.1, is still read (with a warning) until 0.2.
    """

    #: WanPipeline directory (with model_index.json) or hub id
    path: str = attrs.field(
        validator=with_hint(non_empty, "a WanPipeline directory or a hub id such as 'Wan-AI/Wan2.1-T2V-1.3B-Diffusers'")
    )
    #: the negative prompt of true CFG (guidance_scale > 1); WanPipeline's default is the empty prompt
    negative_prompt: str = ""
    #: UMT5 tokens per prompt, padded with zero embeddings to this length as WanPipeline does (its default 512)
    max_sequence_length: int = attrs.field(default=512, validator=positive_int)
    #: CFG scale of the low-noise expert (WanPipeline's ``guidance_scale_2``); left out = the rollout's cfg, as the
    #: pipeline does. Only for two-expert pipelines.
    guidance_scale_2: float | None = attrs.field(
        default=None,
        validator=with_hint(attrs.validators.optional(non_negative_finite), "or left out to use the rollout's cfg"),
    )
    #: two-expert pipelines: which experts get LoRA and train; the others stay frozen (and are their own reference)
    train_experts: Literal["both", "high_noise", "low_noise"] = attrs.field(
        default="both", validator=attrs.validators.in_(EXPERTS)
    )
    #: modules that get LoRA, matched as dotted-name suffixes (default: self- and cross-attention of every block)
    lora_target_modules: tuple[str, ...] = lora_targets_option(DEFAULT_LORA_TARGETS)


@attrs.frozen(kw_only=True)
class WanI2VConfig(WanConfig):
    """How to load a Wan image-to-video pipeline (``wan_i2v``: Wan2.1 I2V, Wan2.2 I2V-A14B; ``wan_ti2v``: Wan2.2
    TI2V-5B) and what to train: every ``wan`` option, plus how many first frames' VAE latents stay on the device.

    The condition latents depend on the output size (the pipeline resizes the first frame to it and, for the
    channel-concat layouts, VAE-encodes a whole clip of it followed by zeros), so they are computed at the first
    transformer call of each (first frame, size) and kept for the rest of the rollout and its update
    (:mod:`omni_rl_wan.i2v`)."""

    #: distinct (first frame, output size) condition latents kept on the device; the least recently used go first
    #: (0 recomputes them for every transformer call, which only costs time)
    condition_cache_size: int = attrs.field(default=32, validator=non_negative_int)
