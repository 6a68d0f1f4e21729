"""Entry point of omni-rl-qwen-image: the ``qwen_image``, ``qwen_image21`` and edit models. Imports nothing heavy
(torch/diffusers load in the factory)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from omni_rl import ModelSpec, hookimpl
from omni_rl_qwen_image.config import QwenImageConfig
from omni_rl_qwen_image.edit_config import QwenImageEditConfig
from omni_rl_qwen_image.qwen21_config import QwenImage21Config

if TYPE_CHECKING:
    from omni_rl import BuildContext
    from omni_rl_qwen_image.edit import QwenImageEditModel, QwenImageEditPlusModel
    from omni_rl_qwen_image.model import QwenImageModel
    from omni_rl_qwen_image.qwen21_model import QwenImage21Model


def _build_qwen_image(config: QwenImageConfig, ctx: BuildContext) -> QwenImageModel:
    from omni_rl_qwen_image.model import build_qwen_image_model

    return build_qwen_image_model(config, ctx)


def _build_qwen_image21(config: QwenImage21Config, ctx: BuildContext) -> QwenImage21Model:
    from omni_rl_qwen_image.qwen21_model import build_qwen_image21_model

    return build_qwen_image21_model(config, ctx)


def _build_qwen_image_edit(config: QwenImageEditConfig, ctx: BuildContext) -> QwenImageEditModel:
    from omni_rl_qwen_image.edit import build_qwen_image_edit_model

    return build_qwen_image_edit_model(config, ctx)


def _build_qwen_image_edit_plus(config: QwenImageEditConfig, ctx: BuildContext) -> QwenImageEditPlusModel:
    from omni_rl_qwen_image.edit import build_qwen_image_edit_plus_model

    return build_qwen_image_edit_plus_model(config, ctx)


@hookimpl
def omni_rl_models() -> list[ModelSpec]:
    return [
        ModelSpec(
            name="qwen_image",
            factory=_build_qwen_image,
            config=QwenImageConfig,
            summary="Qwen-Image (any diffusers QwenImagePipeline directory): true CFG, LoRA via peft, memory options",
            aliases=("qwenimage",),
        ),
        ModelSpec(
            name="qwen_image21",
            factory=_build_qwen_image21,
            config=QwenImage21Config,
            summary="Qwen-Image 2.1 (QwenImage21Pipeline): Qwen3-VL prompts, block-causal DiT, CFG, LoRA via peft",
            aliases=("qwenimage21",),
        ),
        ModelSpec(
            name="qwen_image_edit",
            factory=_build_qwen_image_edit,
            config=QwenImageEditConfig,
            summary="Qwen-Image-Edit (QwenImageEditPipeline): one condition image, true CFG, LoRA, memory options",
            aliases=("qwenimage_edit",),
            condition_images=(1, 1),
        ),
        ModelSpec(
            name="qwen_image_edit_plus",
            factory=_build_qwen_image_edit_plus,
            config=QwenImageEditConfig,
            summary="Qwen-Image-Edit-2509/2511 (QwenImageEditPlusPipeline): 1-3 condition images, zero_cond_t, CFG",
            aliases=("qwenimage_edit_plus",),
            condition_images=(1, 3),
        ),
    ]
