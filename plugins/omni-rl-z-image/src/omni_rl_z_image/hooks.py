"""Entry point of omni-rl-z-image: the ``z_image`` model. Imports nothing heavy (torch/diffusers load in the
factory)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from omni_rl import ModelSpec, hookimpl
from omni_rl_z_image.checks import z_image_check
from omni_rl_z_image.config import ZImageConfig

if TYPE_CHECKING:
    from omni_rl import BuildContext
    from omni_rl_z_image.model import ZImageModel


def _build_z_image(config: ZImageConfig, ctx: BuildContext) -> ZImageModel:
    from omni_rl_z_image.model import build_z_image_model

    return build_z_image_model(config, ctx)


@hookimpl
def omni_rl_models() -> list[ModelSpec]:
    return [
        ModelSpec(
            name="z_image",
            factory=_build_z_image,
            config=ZImageConfig,
            summary="Z-Image / Z-Image-Turbo (any diffusers ZImagePipeline directory): CFG, LoRA via peft, memory",
            aliases=("zimage",),
            check=z_image_check,
        ),
    ]
