"""Entry point of omni-rl-wan: the ``wan`` (text-to-video), ``wan_i2v`` (Wan2.1 I2V, Wan2.2 I2V-A14B) and
``wan_ti2v`` (Wan2.2 TI2V-5B, text- or image-to-video) models. Imports nothing heavy (torch/diffusers load in the
factories).

Three names because ``omni-rl check`` counts each prompt row's condition images against the spec's
``condition_images`` without building (or even reading) the model: a spec is one range, and the layouts take
different ones. A channel-concat transformer (36 input channels) cannot run without a first frame, so ``wan_i2v``
takes exactly one; TI2V-5B's transformer runs with or without one, so ``wan_ti2v`` takes zero or one; ``wan``
stays text-only for every WanPipeline (TI2V-5B included). Each model reads its layout from the pipeline's own
config (``expand_timesteps``, the transformer's ``in_channels`` and ``image_dim``) and refuses one it cannot run,
naming the model that can.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from omni_rl import ModelSpec, hookimpl
from omni_rl_wan.config import WanConfig, WanI2VConfig

if TYPE_CHECKING:
    from omni_rl import BuildContext
    from omni_rl_wan.i2v import WanI2VModel, WanTI2VModel
    from omni_rl_wan.model import WanModel


def _build_wan(config: WanConfig, ctx: BuildContext) -> WanModel:
    from omni_rl_wan.model import build_wan_model

    return build_wan_model(config, ctx)


def _build_wan_i2v(config: WanI2VConfig, ctx: BuildContext) -> WanI2VModel:
    from omni_rl_wan.i2v import build_wan_i2v_model

    return build_wan_i2v_model(config, ctx)


def _build_wan_ti2v(config: WanI2VConfig, ctx: BuildContext) -> WanTI2VModel:
    from omni_rl_wan.i2v import build_wan_ti2v_model

    return build_wan_ti2v_model(config, ctx)


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
        ),
        ModelSpec(
            name="wan_i2v",
            factory=_build_wan_i2v,
            config=WanI2VConfig,
            summary="Wan image-to-video (WanImageToVideoPipeline: Wan2.1 I2V with CLIP image tokens, Wan2.2 I2V-A14B "
            "with two experts): one first frame per prompt, [noisy, mask, condition] channels",
            modality="video",
            condition_images=(1, 1),
        ),
        ModelSpec(
            name="wan_ti2v",
            factory=_build_wan_ti2v,
            config=WanI2VConfig,
            summary="Wan2.2 TI2V-5B text- and image-to-video: an optional first frame, replaced in place with "
            "per-token timesteps 0",
            modality="video",
            condition_images=(0, 1),
        ),
    ]
