"""Entry point of omni-rl-qwen-image: the ``qwen_image`` model. Imports nothing heavy (torch/diffusers load in the
factory)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from omni_rl import ModelSpec, hookimpl
from omni_rl_qwen_image.config import QwenImageConfig

if TYPE_CHECKING:
    from omni_rl import BuildContext
    from omni_rl_qwen_image.model import QwenImageModel


def _build_qwen_image(config: QwenImageConfig, ctx: BuildContext) -> QwenImageModel:
    from omni_rl_qwen_image.model import build_qwen_image_model

    return build_qwen_image_model(config, ctx)


@hookimpl
def omni_rl_models() -> list[ModelSpec]:
    return [
        ModelSpec(
            name="qwen_image",
            factory=_build_qwen_image,
            config=QwenImageConfig,
            summary="Qwen-Image (any diffusers QwenImagePipeline directory): true CFG, LoRA via peft, memory options",
            aliases=("qwenimage",),
        )
    ]
