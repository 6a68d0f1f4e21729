"""Entry point of omni-rl-flux: the ``flux`` model. Imports nothing heavy (torch/diffusers load in the factory)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from omni_rl import ModelSpec, hookimpl
from omni_rl_flux.config import FluxConfig

if TYPE_CHECKING:
    from omni_rl import BuildContext
    from omni_rl_flux.model import FluxModel


def _build_flux(config: FluxConfig, ctx: BuildContext) -> FluxModel:
    from omni_rl_flux.model import build_flux_model

    return build_flux_model(config, ctx)


@hookimpl
def omni_rl_models() -> list[ModelSpec]:
    return [
        ModelSpec(
            name="flux",
            factory=_build_flux,
            config=FluxConfig,
            summary="FLUX.1 dev/schnell/Krea (any diffusers FluxPipeline directory): distilled guidance, true CFG, "
            "LoRA via peft, memory options",
            aliases=("flux1",),
        )
    ]
