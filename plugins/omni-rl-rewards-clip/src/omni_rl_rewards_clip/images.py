"""The image batch a reward receives, as the PIL images the models' own processors were written for."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from PIL import Image


def to_pil(array: np.ndarray) -> list[Image.Image]:
    """One RGB PIL image per sample: the reference scorers hand PIL images to the processors, so resizing here
    goes through the same PIL resampling as theirs."""
    from PIL import Image

    return [Image.fromarray(image) for image in array]


def letterbox(image: Image.Image, size: int) -> Image.Image:
    """HPSv2's evaluation resize: the longer side to ``size`` (bicubic), then zero padding, centred, to a
    ``size`` x ``size`` square (a square image is only resized). The CLIP processor after it then has nothing
    left to resize or crop."""
    from PIL import Image

    width, height = image.size
    scale = size / max(width, height)
    new_width, new_height = round(width * scale), round(height * scale)
    if (new_width, new_height) != (width, height):
        image = image.resize((new_width, new_height), Image.Resampling.BICUBIC)
    if (new_width, new_height) == (size, size):
        return image
    canvas = Image.new("RGB", (size, size), (0, 0, 0))
    canvas.paste(image, ((size - new_width) // 2, (size - new_height) // 2))
    return canvas
