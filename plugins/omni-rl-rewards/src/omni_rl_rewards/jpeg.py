"""JPEG (in)compressibility rewards (DDPO, Flow-GRPO): the file size of the image saved as
JPEG (docs/math.md#jpeg-size).

``size_kB = len(JPEG bytes) / 1000`` (decimal kilobytes, as Flow-GRPO's reference code computes it with
``buffer.tell() / 1000``), encoded by PIL at the configured quality with PIL's other defaults (4:2:0 chroma
subsampling, no ``optimize``), so the numbers match Flow-GRPO's for the same pixels.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from PIL import Image

from omni_rl.batch import RewardResult, check_reward_images
from omni_rl_rewards.config import JpegConfig


def jpeg_size_kb(image: np.ndarray, quality: int = 95) -> float:
    """Size in kB (1000 bytes) of one uint8 (H, W, 3) RGB image encoded by PIL as JPEG at ``quality``."""
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="JPEG", quality=quality)
    return buffer.tell() / 1000.0


class JpegSizeReward:
    """``sign * size_kB / scale`` per image: +1 rewards incompressible images, -1 compressible ones."""

    def __init__(self, config: JpegConfig, *, sign: float) -> None:
        if sign not in (1.0, -1.0):
            raise ValueError(f"sign must be +1 or -1, got {sign!r}")
        self.config = config
        self.sign = sign

    def __call__(
        self, images: np.ndarray, prompts: Sequence[str], metadata: Sequence[Mapping[str, Any]]
    ) -> RewardResult:
        array = check_reward_images(images, prompts)
        sizes = np.array([jpeg_size_kb(image, self.config.quality) for image in array], dtype=np.float64)
        scores = self.sign * sizes / self.config.scale
        return RewardResult(scores=scores, details={"size_kb": sizes})


def build_jpeg_incompressibility(config: JpegConfig, ctx: Any) -> JpegSizeReward:
    """Factory of ``jpeg_incompressibility``: larger JPEG files score higher."""
    return JpegSizeReward(config, sign=1.0)


def build_jpeg_compressibility(config: JpegConfig, ctx: Any) -> JpegSizeReward:
    """Factory of ``jpeg_compressibility``: smaller JPEG files score higher (the score is -size_kB / scale)."""
    return JpegSizeReward(config, sign=-1.0)
