"""The image batch a reward receives, as the PIL images the models' own processors were written for."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from PIL import Image


def check_images(images: Any, prompts: Sequence[str]) -> np.ndarray:
    """``images`` (a uint8 (N, H, W, 3) array, or a CPU tensor of that layout) as a numpy array, or ValueError.

    Another dtype or layout is a bug in the component that produced the images (rewards score decoded uint8 RGB,
    never latents or [0, 1] floats), so this raises rather than guessing a range to rescale from.
    """
    array = np.asarray(images)
    if array.ndim != 4 or array.shape[-1] != 3:
        raise ValueError(f"images must have shape (N, H, W, 3) (RGB, channels last), got {array.shape}")
    if array.dtype != np.uint8:
        raise ValueError(f"images must be uint8 in [0, 255], got dtype {array.dtype}")
    if len(prompts) != len(array):
        raise ValueError(f"got {len(array)} images but {len(prompts)} prompts; they must pair up")
    return array


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
