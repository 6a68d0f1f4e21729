"""LoRA on Wan: omni-rl-pipelines' adapter bookkeeping with WanPipeline's file format, and Wan2.2's two experts.

One transformer (Wan2.1, Wan2.2 TI2V-5B) is :class:`WanLoraAdapters`: ``transformer.``-prefixed peft keys in
``pytorch_lora_weights.safetensors`` with the LoRA config as metadata, which ``WanPipeline.load_lora_weights``
reads. Wan2.2 A14B has two experts; :class:`ExpertLoraAdapters` keeps one adapter set per trained expert and acts
on all of them at once (the reference view turns every adapter off, the "old" adapter of DiffusionNFT exists on
each). Its files follow how Wan2.2 LoRAs are published and loaded, one file per expert:

* ``<dir>/pytorch_lora_weights.safetensors``: the high-noise expert (``pipe.load_lora_weights(dir)``);
* ``<dir>/transformer_2/pytorch_lora_weights.safetensors``: the low-noise expert
  (``pipe.load_lora_weights(dir / "transformer_2", load_into_transformer_2=True)``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import torch
from omni_rl_pipelines.lora import LORA_WEIGHT_NAME, TRAINED_ADAPTER, LoraAdapters

from omni_rl_wan.experts import HIGH_NOISE

__all__ = ["LORA_WEIGHT_NAME", "TRAINED_ADAPTER", "ExpertLoraAdapters", "WanLoraAdapters", "expert_lora_dir"]


def expert_lora_dir(directory: str | Path, component: str) -> Path:
    """Where the LoRA of expert ``component`` ("transformer" or "transformer_2") lives under ``directory``."""
    return Path(directory) if component == HIGH_NOISE else Path(directory) / component


class WanLoraAdapters(LoraAdapters):
    """Named LoRA adapters on one ``WanTransformer3DModel``; ``"default"`` is the one the optimizer trains."""

    pipeline_class = "WanPipeline"
    model_label = "Wan"
    target_hint = (
        "lora_target_modules are dotted-name suffixes of transformer modules, e.g. 'to_q', 'attn1.to_k', "
        "'attn2.to_v', 'ffn.net.0.proj', 'ffn.net.2'"
    )


class ExpertLoraAdapters:
    """The same adapters on every trained expert of a two-expert Wan2.2 pipeline, used as one.

    ``experts`` maps the pipeline component name ("transformer", "transformer_2") to that expert's adapters; an
    expert left out is frozen without LoRA, so it is the same in every view."""

    def __init__(self, experts: dict[str, WanLoraAdapters]) -> None:
        self.experts = experts

    @property
    def names(self) -> tuple[str, ...]:
        return next(iter(self.experts.values())).names

    @property
    def active(self) -> str:
        return next(iter(self.experts.values())).active

    def trained_parameters(self) -> list[torch.nn.Parameter]:
        return [p for adapters in self.experts.values() for p in adapters.trained_parameters()]

    def parameters_of(self, name: str) -> list[torch.nn.Parameter]:
        return [p for adapters in self.experts.values() for p in adapters.parameters_of(name)]

    def add(self, name: str, *, copy_from: str | None = TRAINED_ADAPTER) -> None:
        for adapters in self.experts.values():
            adapters.add(name, copy_from=copy_from)

    def blend(self, target: str, source: str, *, decay: float) -> None:
        for adapters in self.experts.values():
            adapters.blend(target, source, decay=decay)

    @contextmanager
    def use(self, name: str) -> Iterator[None]:
        with ExitStack() as stack:
            for adapters in self.experts.values():
                stack.enter_context(adapters.use(name))
            yield

    @contextmanager
    def disabled(self) -> Iterator[None]:
        with ExitStack() as stack:
            for adapters in self.experts.values():
                stack.enter_context(adapters.disabled())
            yield

    def save(self, directory: str | Path, *, name: str = TRAINED_ADAPTER) -> Path:
        """One file per trained expert (module docstring); a collective under FSDP2, as for one transformer."""
        for component, adapters in self.experts.items():
            adapters.save(expert_lora_dir(directory, component), name=name)
        return Path(directory) / LORA_WEIGHT_NAME

    def load(self, directory: str | Path, *, name: str = TRAINED_ADAPTER) -> None:
        for component, adapters in self.experts.items():
            adapters.load(expert_lora_dir(directory, component), name=name)
