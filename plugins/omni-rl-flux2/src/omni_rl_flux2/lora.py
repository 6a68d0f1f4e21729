"""LoRA adapters on the FLUX.2 transformer: omni-rl-pipelines' adapter bookkeeping, with FLUX.2-klein's file format.

The bookkeeping (trained and frozen adapters, reference view, fp32 LoRA weights, seeded init) is
:class:`omni_rl_pipelines.lora.LoraAdapters`'; what this sets is the pipeline class that writes and reads the files
(``Flux2KleinPipeline.save_lora_weights`` / ``lora_state_dict``, which ``Flux2KleinPipeline.load_lora_weights``
reads, alpha included) and the hint for a bad target name.
"""

from __future__ import annotations

from omni_rl_pipelines.lora import LoraAdapters


class Flux2KleinLoraAdapters(LoraAdapters):
    """Named LoRA adapters on a ``Flux2Transformer2DModel``; ``"default"`` is the one the optimizer trains."""

    pipeline_class = "Flux2KleinPipeline"
    model_label = "FLUX.2-klein"
    target_hint = (
        "lora_target_modules are dotted-name suffixes of FLUX.2 transformer modules, e.g. 'attn.to_q', "
        "'attn.add_q_proj', 'ff.linear_in', 'ff_context.linear_out', 'attn.to_qkv_mlp_proj', "
        "'single_transformer_blocks.0.attn.to_out'"
    )
