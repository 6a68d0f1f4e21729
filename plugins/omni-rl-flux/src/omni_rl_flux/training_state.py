"""Full fine-tuning's files (``lora_rank = 0``): the whole transformer under ``<directory>/transformer``.

What ``save_pretrained`` writes (config.json and one safetensors file), also from an FSDP2-sharded transformer,
where ``save_pretrained`` itself would write this worker's shards under an ``FSDP...`` class name: the weights are
gathered whole one tensor at a time (a collective) and rank 0 writes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from omni_rl.errors import RuntimeFailure

#: the folder :meth:`FullTransformerFiles.save` writes inside a checkpoint
FULL_TRANSFORMER_DIR = "transformer"


class FullTransformerFiles:
    """Saves and loads every weight of one (possibly sharded) FLUX transformer."""

    def __init__(self, transformer: torch.nn.Module) -> None:
        self.transformer = transformer

    def save(self, directory: str | Path) -> None:
        from safetensors.torch import save_file

        from omni_rl.runtime.fsdp import gather_state, is_sharded

        target = Path(directory) / FULL_TRANSFORMER_DIR
        if not any(is_sharded(p) for p in self.transformer.parameters()):
            self.transformer.save_pretrained(target)
            return
        state = gather_state(self.transformer.state_dict())
        if state is None:
            return
        config = json.loads(self.transformer.to_json_string())
        config["_class_name"] = str(config["_class_name"]).removeprefix("FSDP")
        target.mkdir(parents=True, exist_ok=True)
        (target / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        save_file(state, str(target / "diffusion_pytorch_model.safetensors"), metadata={"format": "pt"})

    def load(self, directory: str | Path, *, dtype: Any) -> None:
        from diffusers import FluxTransformer2DModel
        from omni_rl_sd3.compat import dtype_kwargs

        source = Path(directory) / FULL_TRANSFORMER_DIR
        if not (source / "config.json").is_file():
            raise RuntimeFailure(
                f"no fully fine-tuned transformer in {source}",
                hint="lora_rank = 0 checkpoints hold a transformer/ folder written by save_lora",
            )
        loaded = FluxTransformer2DModel.from_pretrained(source, **dtype_kwargs(dtype))
        with torch.no_grad():
            self.transformer.load_state_dict(loaded.state_dict())
