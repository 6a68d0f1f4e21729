"""Entry point of omni-rl-flux2: the ``flux2_klein`` model. Imports nothing heavy (torch/diffusers load in the
factory)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from omni_rl import ModelSpec, hookimpl
from omni_rl_flux2.config import Flux2KleinConfig

if TYPE_CHECKING:
    from omni_rl import BuildContext
    from omni_rl_flux2.model import Flux2KleinModel


def _build_flux2_klein(config: Flux2KleinConfig, ctx: BuildContext) -> Flux2KleinModel:
    from omni_rl_flux2.model import build_flux2_klein_model

    return build_flux2_klein_model(config, ctx)


@hookimpl
def omni_rl_models() -> list[ModelSpec]:
    return [
        ModelSpec(
            name="flux2_klein",
            factory=_build_flux2_klein,
            config=Flux2KleinConfig,
            summary="FLUX.2-klein 4B/9B (any diffusers Flux2KleinPipeline directory; Qwen3 text encoder): CFG on the "
            "base variants, none on the step-distilled ones, LoRA via peft, memory options",
            aliases=("klein",),
        ),
    ]
