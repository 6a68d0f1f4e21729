"""Reading a preference pair's images: which record fields hold them, where their bytes are (a file, or encoded
bytes inside the record), and how they become uint8 arrays of the run's size.

A record is one ``.jsonl`` line or one ``.parquet`` row (its prompt removed). Its images are either

- ``chosen`` and ``rejected`` (the layout of the ``.jsonl`` lines), or
- ``jpg_0``, ``jpg_1`` and ``label_0`` (the Pick-a-Pic layout: ``label_0 = 1`` prefers ``jpg_0``, ``0`` prefers
  ``jpg_1``; ties, ``0.5``, carry no preference and are refused, as the Diffusion-DPO reference drops them).

Each image field is a path (relative to ``image_root``, or absolute), encoded PNG/JPEG bytes, or the struct
``{"bytes": ..., "path": ...}`` that HuggingFace datasets' ``Image`` feature stores (its bytes when present,
else its path).
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from omni_rl.errors import RuntimeFailure

#: the roles of a pair's two samples, in group order: {"prompt": ..., "chosen": "good.png", "rejected": "bad.png"}
ROLES: tuple[str, str] = ("chosen", "rejected")
#: the Pick-a-Pic layout: two image columns and the preference of the first
PICKAPIC_IMAGES: tuple[str, str] = ("jpg_0", "jpg_1")
PICKAPIC_LABEL = "label_0"
LINE_HINT = (
    'each [data] train record needs a prompt and two images: a .jsonl line {"prompt": "a red circle", "chosen": '
    '"good.png", "rejected": "bad.png"}, or .parquet columns prompt (or caption), chosen, rejected (or the '
    "Pick-a-Pic columns jpg_0, jpg_1, label_0). An image is a path (relative to [rollout] options.image_root, or "
    'absolute), PNG/JPEG bytes, or a {"bytes": ..., "path": ...} struct'
)


@attrs.frozen
class ImageSource:
    """One preference image: a file, or encoded bytes carried by the record."""

    #: names the image in errors, e.g. "the 'chosen' image of prompt 'a red circle'"
    label: str
    path: Path | None = None
    data: bytes | None = None

    @property
    def key(self) -> str:
        """Identifies the image for the latent cache: its resolved path, or the digest of its bytes."""
        if self.data is not None:
            return "sha256:" + hashlib.sha256(self.data).hexdigest()
        return str(self.path)


def image_source(metadata: Mapping[str, Any], role: str, prompt: str, image_root: str) -> ImageSource:
    """The ``role`` ("chosen" or "rejected") image of one preference record (read by :func:`load_image`, which
    checks that it exists and decodes, unless the image is already cached)."""
    label = f"the {role!r} image of prompt {prompt!r}"
    value = _role_value(metadata, role, prompt)
    if isinstance(value, dict):  # HuggingFace datasets' Image feature: {"bytes": ..., "path": ...}
        value = value.get("bytes") or value.get("path")
    if isinstance(value, (bytes, bytearray, memoryview)) and len(value):
        return ImageSource(label, data=bytes(value))
    if isinstance(value, str) and value.strip():
        path = Path(value).expanduser()
        if not path.is_absolute() and image_root:
            path = Path(image_root).expanduser() / path
        return ImageSource(label, path=path)
    raise RuntimeFailure(
        f"the preference record of prompt {prompt!r} has no {role!r} image path or image bytes "
        f"(got {type(value).__name__})",
        hint=LINE_HINT,
    )


def _role_value(metadata: Mapping[str, Any], role: str, prompt: str) -> Any:
    """The field holding the ``role`` image: ``chosen``/``rejected``, or the Pick-a-Pic column ``label_0`` picks."""
    if role in metadata or PICKAPIC_LABEL not in metadata:
        return metadata.get(role)
    label = metadata[PICKAPIC_LABEL]
    if label not in (0, 1):  # 0.5 is a tie; None or anything else is no preference either
        raise RuntimeFailure(
            f"the preference record of prompt {prompt!r} has {PICKAPIC_LABEL} = {label!r}, which prefers neither image",
            hint=f"keep only the rows whose {PICKAPIC_LABEL} is 0 or 1 (Pick-a-Pic marks ties with 0.5)",
        )
    chosen = 0 if label == 1 else 1
    return metadata.get(PICKAPIC_IMAGES[chosen if role == ROLES[0] else 1 - chosen])


def load_image(source: ImageSource | Path, height: int, width: int) -> np.ndarray:
    """uint8 RGB array (height, width, 3): scaled (bicubic) to cover the size, then centre-cropped.

    Cover-and-crop keeps the aspect ratio (no squashing), as the Diffusion-DPO reference's resize + crop does;
    centre rather than random crops keep the cached latents a function of the image alone.
    """
    from PIL import Image, ImageOps, UnidentifiedImageError

    if isinstance(source, Path):
        source = ImageSource(f"preference image {source}", path=source)
    if source.data is not None:
        opened, where = io.BytesIO(source.data), f"{source.label} ({len(source.data)} bytes)"
    else:
        assert source.path is not None
        if not source.path.is_file():
            raise RuntimeFailure(
                f"preference image {source.path} does not exist ({source.label})",
                hint="relative paths are resolved against [rollout] options.image_root (default: the working "
                "directory)",
            )
        opened, where = source.path, f"preference image {source.path}"
    try:
        with Image.open(opened) as image:
            rgb = image.convert("RGB")
    except (OSError, UnidentifiedImageError) as error:
        raise RuntimeFailure(
            f"cannot read {where}: {error}", hint="images must be PNG or JPEG files, or PNG/JPEG bytes"
        ) from error
    fitted = ImageOps.fit(rgb, (width, height), method=Image.Resampling.BICUBIC, centering=(0.5, 0.5))
    return np.asarray(fitted, dtype=np.uint8)
