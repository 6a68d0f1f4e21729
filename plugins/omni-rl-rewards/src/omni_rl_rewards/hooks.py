"""Hook implementations: the reward components of this plugin.

Only the option classes (attrs) are imported here; PIL, Levenshtein and rapidocr/onnxruntime are imported
inside the factories, so listing plugins stays fast and works without those packages importable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from omni_rl import RewardSpec, hookimpl
from omni_rl_rewards.config import JpegConfig, OcrConfig

if TYPE_CHECKING:
    from omni_rl_rewards.jpeg import JpegSizeReward
    from omni_rl_rewards.ocr import OcrReward


def _build_jpeg_incompressibility(config: JpegConfig, ctx: Any) -> JpegSizeReward:
    from omni_rl_rewards.jpeg import build_jpeg_incompressibility

    return build_jpeg_incompressibility(config, ctx)


def _build_jpeg_compressibility(config: JpegConfig, ctx: Any) -> JpegSizeReward:
    from omni_rl_rewards.jpeg import build_jpeg_compressibility

    return build_jpeg_compressibility(config, ctx)


def _build_ocr(config: OcrConfig, ctx: Any) -> OcrReward:
    from omni_rl_rewards.ocr import build_ocr

    return build_ocr(config, ctx)


@hookimpl
def omni_rl_reward_models() -> list[RewardSpec]:
    return [
        RewardSpec(
            name="jpeg_incompressibility",
            factory=_build_jpeg_incompressibility,
            config=JpegConfig,
            summary="size in kB of the image as JPEG (quality 95), divided by `scale`",
        ),
        RewardSpec(
            name="jpeg_compressibility",
            factory=_build_jpeg_compressibility,
            config=JpegConfig,
            summary="minus the JPEG size in kB, divided by `scale` (Flow-GRPO: 500)",
        ),
        RewardSpec(
            name="ocr",
            factory=_build_ocr,
            config=OcrConfig,
            summary="1 - capped edit distance between OCR text and the prompt's quoted text (rapidocr, CPU)",
        ),
    ]
