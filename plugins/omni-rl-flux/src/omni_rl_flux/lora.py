"""LoRA adapters on the FLUX transformer: omni-rl-pipelines' adapter bookkeeping, with FLUX's file format.

The bookkeeping (a trained ``"default"`` adapter, frozen extra adapters such as DiffusionNFT's ``"old"``, the
reference view with adapters off, fp32 LoRA weights over a bf16 base, seeded init so every worker starts alike)
does not depend on the architecture, so it is :class:`omni_rl_pipelines.lora.LoraAdapters`. What FLUX changes is the
pipeline class that writes and reads the files (``FluxPipeline.save_lora_weights`` / ``lora_state_dict``: the same
``transformer.``-prefixed peft keys and LoRA-config metadata, which ``FluxPipeline.load_lora_weights`` reads, alpha
included), and the hint for a bad target name.
"""

from __future__ import annotations

from omni_rl_pipelines.lora import LORA_WEIGHT_NAME, TRAINED_ADAPTER, LoraAdapters

__all__ = ["LORA_WEIGHT_NAME", "TRAINED_ADAPTER", "FluxLoraAdapters"]


class FluxLoraAdapters(LoraAdapters):
    """Named LoRA adapters on a ``FluxTransformer2DModel``; ``"default"`` is the one the optimizer trains."""

    pipeline_class = "FluxPipeline"
    model_label = "FLUX"
    target_hint = (
        "lora_target_modules are dotted-name suffixes of FLUX transformer modules, e.g. 'attn.to_q', "
        "'attn.add_q_proj', 'ff.net.2', 'ff_context.net.2', 'proj_mlp', 'proj_out', 'norm1.linear'"
    )
