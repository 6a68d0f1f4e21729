"""Entry point of omni-rl-flux: the ``flux`` and ``flux_kontext`` models. Imports nothing heavy (torch/diffusers load
in the factories)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from omni_rl import ModelSpec, hookimpl
from omni_rl_flux.config import FluxConfig
from omni_rl_flux.kontext_config import FluxKontextConfig

if TYPE_CHECKING:
    from omni_rl import BuildContext
    from omni_rl_flux.kontext import FluxKontextModel
    from omni_rl_flux.model import FluxModel


def _build_flux(config: FluxConfig, ctx: BuildContext) -> FluxModel:
    from omni_rl_flux.model import build_flux_model

    return build_flux_model(config, ctx)


def _build_flux_kontext(config: FluxKontextConfig, ctx: BuildContext) -> FluxKontextModel:
    from omni_rl_flux.kontext import build_flux_kontext_model

    return build_flux_kontext_model(config, ctx)


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
        ),
        ModelSpec(
            name="flux_kontext",
            factory=_build_flux_kontext,
            config=FluxKontextConfig,
            summary="FLUX.1-Kontext image editing (any diffusers FluxKontextPipeline directory): one source image "
            "per prompt at a size you choose (condition_max_area), distilled guidance, true CFG, LoRA via peft",
            aliases=("kontext",),
            condition_images=(1, 1),
        ),
    ]
