"""Option records of the reward components.

Kept apart from the component modules so that ``hooks.py`` can hand these classes to the registry (which
validates ``[[reward]] options`` against them) without importing PIL or onnxruntime.
"""

from __future__ import annotations

from typing import Literal

import attrs

from omni_rl.validators import int_between, non_negative_int, positive_finite, positive_int, unit_interval


@attrs.frozen(kw_only=True)
class JpegConfig:
    """Options of ``jpeg_compressibility`` and ``jpeg_incompressibility``.

    The score is ``±size_kB / scale``. Flow-GRPO's ``jpeg_compressibility`` uses ``scale = 500`` (its
    incompressibility uses 1); the default here is 1 so the score reads directly in kB.
    """

    #: the score is divided by this (> 0); Flow-GRPO's compressibility reward uses 500
    scale: float = attrs.field(default=1.0, converter=float, validator=positive_finite)
    #: PIL JPEG quality the size is measured at (Flow-GRPO and DDPO use 95)
    quality: int = attrs.field(default=95, validator=int_between(1, 100, hint="PIL's JPEG quality scale"))


@attrs.frozen(kw_only=True)
class OcrConfig:
    """Options of ``ocr``.

    ``min_confidence`` defaults to 0.5 because that is what Flow-GRPO effectively applies: PaddleOCR drops
    recognised strings scoring below its ``drop_score`` of 0.5 before Flow-GRPO sees them.
    """

    #: OCR backend; only "rapidocr" (rapidocr-onnxruntime, models shipped in its wheel, CPU) for now
    engine: Literal["rapidocr"] = attrs.field(default="rapidocr", validator=attrs.validators.in_(("rapidocr",)))
    #: detect text boxes first (True, any layout); False recognises the whole image as one text line,
    #: about 7x faster but only right for images that are a single line of text
    use_det: bool = True
    #: run the 0/180-degree text-direction classifier (Flow-GRPO runs PaddleOCR with it off)
    use_cls: bool = False
    #: detection input size: with "max", images whose longer side exceeds ``det_limit_side_len`` are shrunk
    #: to it; with "min", images whose shorter side is below it are enlarged to it (better for tiny text, but
    #: about 3x slower on 512x512 images). The defaults are PaddleOCR's, hence Flow-GRPO's; rapidocr's own
    #: are "min" / 736.
    det_limit_type: Literal["max", "min"] = attrs.field(default="max", validator=attrs.validators.in_(("max", "min")))
    det_limit_side_len: int = attrs.field(default=960, validator=positive_int)
    #: recognised strings with a confidence below this are ignored
    min_confidence: float = attrs.field(default=0.5, converter=float, validator=unit_interval)
    #: onnxruntime intra-op threads (0 = onnxruntime's default, all cores)
    num_threads: int = attrs.field(default=0, validator=non_negative_int)
    #: ONNX recognition model to use instead of the wheel's Chinese+English PP-OCRv4 one ("" = the wheel's),
    #: e.g. an English-only PP-OCR model converted to ONNX, closer to Flow-GRPO's PaddleOCR(lang="en")
    rec_model_path: str = ""
    #: character dictionary of ``rec_model_path`` when the model does not embed one ("" = embedded)
    rec_keys_path: str = ""
