"""Entry point of omni-rl-wan: the ``wan`` model. Imports nothing heavy (torch/diffusers load in the factory)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from omni_rl import ModelSpec, hookimpl
from omni_rl_wan.config import WanConfig

if TYPE_CHECKING:
    from omni_rl import BuildContext
    from omni_rl_wan.model import WanModel


def _build_wan(config: WanConfig, ctx: BuildContext) -> WanModel:
    from omni_rl_wan.model import build_wan_model

    return build_wan_model(config, ctx)


@hookimpl
def omni_rl_models() -> list[ModelSpec]:
    return [
        ModelSpec(
            name="wan",
            factory=_build_wan,
            config=WanConfig,
            summary="Wan2.1 / Wan2.2 text-to-video (any diffusers WanPipeline directory): two-expert routing, true "
            "CFG, LoRA via peft, memory options",
            modality="video",  # as WanModel.modality: `check` refuses frames for image models without building one
        )
    ]
