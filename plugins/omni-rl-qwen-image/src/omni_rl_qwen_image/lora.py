"""LoRA adapters on the Qwen-Image transformer: omni-rl-pipelines' adapter bookkeeping, with Qwen-Image's file format.

RL fine-tuning evaluates up to three policies from one set of base weights: the current policy (the trained
adapter, ``"default"``), the reference (adapters off) and, for DiffusionNFT/AWM, an ``"old"``/``"ema"`` policy kept
as another adapter. That bookkeeping does not depend on the architecture, so it is
:class:`omni_rl_pipelines.lora.LoraAdapters`. What Qwen-Image changes is the pipeline class that writes and reads the
files (diffusers' Qwen-Image LoRA format: ``transformer.``-prefixed peft keys in
``pytorch_lora_weights.safetensors``, the LoRA config as metadata, which ``QwenImagePipeline.load_lora_weights``
reads) and the hint for a bad target name.
"""

from __future__ import annotations

from omni_rl_pipelines.lora import LORA_WEIGHT_NAME, TRAINED_ADAPTER, LoraAdapters

__all__ = ["LORA_WEIGHT_NAME", "TRAINED_ADAPTER", "QwenLoraAdapters"]


class QwenLoraAdapters(LoraAdapters):
    """Named LoRA adapters on a ``QwenImageTransformer2DModel``; ``"default"`` is the one the optimizer trains."""

    pipeline_class = "QwenImagePipeline"
    model_label = "Qwen-Image"
    target_hint = (
        "lora_target_modules are dotted-name suffixes of transformer modules, e.g. 'attn.to_q', "
        "'attn.add_q_proj', 'img_mlp.net.2', 'img_mod.1'"
    )
