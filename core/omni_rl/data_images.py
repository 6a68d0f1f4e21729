"""Condition images of a prompt row: the source image of an edit, the first frame of an image-to-video clip.

A ``.jsonl`` object or ``.parquet`` row carries them in ``image`` (one) or ``images`` (a list), each a path
(relative to the prompt file's folder, or absolute) or the image's encoded bytes (parquet cells; HuggingFace
datasets' ``{"bytes": ..., "path": ...}`` struct too). Reading a prompt source checks every one of them (the file
exists and decodes as an image), so a broken row stops ``check`` and ``run`` before training, naming the file,
the row and the field; the pixels are decoded only when a row is drawn (:func:`load_condition`), so a large edit
set is not held decoded in the driver's memory.

The loading rule, the same for every model: EXIF orientation applied, converted to RGB, and downscaled (Lanczos,
aspect ratio kept) only when larger than ``[data] condition_max_pixels``; each model then sizes the copies it
encodes with its own options (``condition_max_area`` and the like), as its diffusers pipeline does.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from omni_rl.errors import ConfigError

#: the row fields that hold condition images
IMAGE_FIELDS: tuple[str, ...] = ("image", "images")
#: the default cap of ``[data] condition_max_pixels``: 1024 x 1024, the largest condition the edit pipelines use
DEFAULT_MAX_PIXELS = 1024 * 1024
_HINT = (
    "give each condition image as a path relative to the prompt file (or absolute) or as encoded image bytes, in "
    'the row\'s "image" field (one) or "images" field (a list)'
)


@attrs.frozen(eq=False)
class ImageRef:
    """Where one condition image is: a file, or its encoded bytes; ``where`` names it in errors
    (``edits.jsonl:3 field 'image'``)."""

    where: str
    path: Path | None = None
    data: bytes | None = attrs.field(default=None, repr=False)

    def read(self) -> bytes:
        if self.data is not None:
            return self.data
        assert self.path is not None
        return self.path.read_bytes()


def take_image_refs(row: dict[str, Any], base: Path | None, where: str, config_path: str) -> tuple[ImageRef, ...]:
    """Remove the image fields from ``row`` (a record's metadata) and return its condition images, each checked
    to exist and decode. ``base`` is the folder relative paths start from; ``where`` is ``file:row``."""
    refs: list[ImageRef] = []
    for field in IMAGE_FIELDS:
        if field not in row:
            continue
        value = row.pop(field)
        if value is None:
            continue
        items = value if field == "images" else [value]
        if field == "images" and not isinstance(value, list | tuple):
            raise ConfigError(
                f"{where}: field 'images' must be a list of images, got {type(value).__name__} @ {config_path}",
                hint=_HINT,
            )
        for k, item in enumerate(items):
            label = f"{where} field {field!r}" + (f"[{k}]" if field == "images" else "")
            refs.append(_ref(item, base, label, config_path))
    return tuple(refs)


def _ref(item: Any, base: Path | None, label: str, config_path: str) -> ImageRef:
    if isinstance(item, dict):  # HuggingFace datasets' Image feature: {"bytes": b"...", "path": "x.png"}
        item = item.get("bytes") or item.get("path")
    if isinstance(item, bytes | bytearray):
        ref = ImageRef(label, data=bytes(item))
    elif isinstance(item, str) and item.strip():
        path = Path(item).expanduser()
        if not path.is_absolute() and base is not None:
            path = base / path
        if not path.is_file():
            raise ConfigError(f"{label}: condition image {item!r} does not exist ({path}) @ {config_path}", hint=_HINT)
        ref = ImageRef(label, path=path)
    else:
        raise ConfigError(
            f"{label}: a condition image must be a path or encoded bytes, got {item!r} @ {config_path}", hint=_HINT
        )
    _verify(ref, config_path)
    return ref


def _verify(ref: ImageRef, config_path: str) -> None:
    """Decode the header and check the file's structure (no pixels): a non-image file is refused here."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(ref.read())) as image:
            image.verify()
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        what = f"{ref.path}" if ref.path is not None else "its bytes"
        raise ConfigError(
            f"{ref.where}: not a readable image ({what}: {type(exc).__name__}: {exc}) @ {config_path}",
            hint="give a PNG, JPEG or WebP image (or another format Pillow reads)",
        ) from None


def load_condition(ref: ImageRef, max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """The image as uint8 (H, W, 3): EXIF orientation applied, RGB, downscaled to at most ``max_pixels`` pixels
    (Lanczos, aspect ratio kept, each side at least 1) and never upscaled."""
    from PIL import Image, ImageOps

    with Image.open(io.BytesIO(ref.read())) as opened:
        image = ImageOps.exif_transpose(opened).convert("RGB")
    w, h = image.size
    if w * h > max_pixels:
        scale = math.sqrt(max_pixels / (w * h))
        image = image.resize((max(1, int(w * scale)), max(1, int(h * scale))), Image.Resampling.LANCZOS)
    return np.asarray(image, dtype=np.uint8).copy()


def records_conditions(records: Sequence[Any], max_pixels: int = DEFAULT_MAX_PIXELS) -> list[tuple[np.ndarray, ...]]:
    """Each sample's condition images for a rollout request (``RolloutRequest.conditions``), decoded once per
    distinct record (a group repeats its record); empty when no record has any, so a text-only request stays
    text-only. ``records``: prompt records (``PromptRecord``), one per sample. The trainer and ``omni-rl eval``
    build their requests with it."""
    if not any(record.images for record in records):
        return []
    decoded: dict[int, tuple[np.ndarray, ...]] = {}
    for record in records:
        if id(record) not in decoded:
            decoded[id(record)] = tuple(load_condition(ref, max_pixels) for ref in record.images)
    return [decoded[id(record)] for record in records]
