"""LoRA adapters on the Z-Image transformer: omni-rl-pipelines' bookkeeping with Z-Image's file format
(``transformer.``-prefixed peft keys in ``pytorch_lora_weights.safetensors``, which
``ZImagePipeline.load_lora_weights`` reads)."""

from __future__ import annotations

from omni_rl_pipelines.lora import LoraAdapters


class ZImageLoraAdapters(LoraAdapters):
    """Named LoRA adapters on a ``ZImageTransformer2DModel``; ``"default"`` is the one the optimizer trains."""

    pipeline_class = "ZImagePipeline"
    model_label = "Z-Image"
    target_hint = (
        "lora_target_modules are dotted-name suffixes of transformer modules, e.g. 'attention.to_q', "
        "'attention.to_out.0', 'feed_forward.w1', 'adaLN_modulation.0'"
    )
