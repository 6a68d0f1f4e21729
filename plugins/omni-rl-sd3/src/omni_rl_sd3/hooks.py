"""Entry point of omni-rl-sd3: the ``sd3`` model. Imports nothing heavy (torch/diffusers load in the factory)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from omni_rl import ModelSpec, hookimpl
from omni_rl_sd3.config import SD3Config

if TYPE_CHECKING:
    from omni_rl import BuildContext
    from omni_rl_sd3.model import SD3Model


def _build_sd3(config: SD3Config, ctx: BuildContext) -> SD3Model:
    from omni_rl_sd3.model import build_sd3_model

    return build_sd3_model(config, ctx)


@hookimpl
def omni_rl_models() -> list[ModelSpec]:
    return [
        ModelSpec(
            name="sd3",
            factory=_build_sd3,
            config=SD3Config,
            summary="Stable Diffusion 3 / 3.5 (any diffusers StableDiffusion3Pipeline directory), LoRA via peft",
            aliases=("sd3_5", "stable_diffusion_3"),
        )
    ]
