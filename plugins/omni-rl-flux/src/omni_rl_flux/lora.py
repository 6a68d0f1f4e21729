"""LoRA adapters on the FLUX transformer: the SD3 plugin's adapter bookkeeping, with FLUX's file format.

The bookkeeping (a trained ``"default"`` adapter, frozen extra adapters such as DiffusionNFT's ``"old"``, the
reference view with adapters off, fp32 LoRA weights over a bf16 base, seeded init so every worker starts alike)
does not depend on the architecture, so it is :class:`omni_rl_sd3.lora.LoraAdapters`. What FLUX changes is the
writer: ``FluxPipeline.save_lora_weights`` (the same ``transformer.``-prefixed peft keys and LoRA-config metadata,
which ``FluxPipeline.load_lora_weights`` reads, alpha included), and the hint for a bad target name.
"""

from __future__ import annotations

from pathlib import Path

from omni_rl_sd3.lora import LORA_WEIGHT_NAME, TRAINED_ADAPTER, LoraAdapters

from omni_rl.errors import ConfigError

__all__ = ["LORA_WEIGHT_NAME", "TRAINED_ADAPTER", "FluxLoraAdapters"]

_TARGET_HINT = (
    "lora_target_modules are dotted-name suffixes of FLUX transformer modules, e.g. 'attn.to_q', 'attn.add_q_proj', "
    "'ff.net.2', 'ff_context.net.2', 'proj_mlp', 'proj_out', 'norm1.linear'"
)


class FluxLoraAdapters(LoraAdapters):
    """Named LoRA adapters on a ``FluxTransformer2DModel``; ``"default"`` is the one the optimizer trains."""

    def save(self, directory: str | Path, *, name: str = TRAINED_ADAPTER) -> Path:
        """Write ``pytorch_lora_weights.safetensors`` for ``FluxPipeline.load_lora_weights`` (alpha travels in the
        metadata). A collective under FSDP2: the weights are gathered whole and rank 0 writes."""
        from diffusers import FluxPipeline
        from peft.utils import get_peft_model_state_dict

        from omni_rl.runtime.fsdp import gather_state

        directory = Path(directory)
        state = gather_state(get_peft_model_state_dict(self.transformer, adapter_name=name))
        if state is None:  # a rank > 0 of a sharded model
            return directory / LORA_WEIGHT_NAME
        directory.mkdir(parents=True, exist_ok=True)
        FluxPipeline.save_lora_weights(
            directory,
            transformer_lora_layers=state,
            transformer_lora_adapter_metadata=self.transformer.peft_config[name].to_dict(),
        )
        return directory / LORA_WEIGHT_NAME

    def _inject(self, name: str) -> None:
        try:
            super()._inject(name)
        except ConfigError as error:
            raise ConfigError(error.message.replace("SD3", "FLUX"), hint=_TARGET_HINT) from error.__cause__
