"""Options of the GenEval scorer, shared by the ``geneval`` reward and the ``geneval`` benchmark.

Torch-free so ``hooks.py`` hands the class to the registry (config checks, ``omni-rl plugins``) in milliseconds.
The defaults are GenEval's (``evaluation/evaluate_images.py``); each one is an option because training rewards
(Flow-GRPO) and ablations change them, and a test must be able to point the models at tiny local copies.
"""

from __future__ import annotations

from typing import Any

import attrs

from omni_rl.validators import finite_between, non_empty, positive_int, with_hint

#: transformers' port of Mask2Former Swin-S trained on COCO instance segmentation (README: what differs from
#: the mmdetection checkpoint GenEval itself loads)
DETECTOR = "facebook/mask2former-swin-small-coco-instance"
CLIP_MODEL = "openai/clip-vit-large-patch14"


#: a model option: a hub id (fetched once, then read from the cache) or a local directory
_model_source = with_hint(non_empty, "give a hub id or a local directory")
#: a detector / colour confidence: GenEval keeps a detection whose float32 score is above it, so 1 keeps nothing
_confidence = finite_between(0.0, 1.0, high_open=True, hint="a confidence in [0, 1) (GenEval's default 0.3)")


def _device(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    if value != "auto" and value.split(":")[0] not in ("cpu", "cuda", "mps", "xpu", "npu"):
        raise ValueError(f"must be 'auto' or a torch device such as 'cpu' or 'cuda:1', got {value!r}")


@attrs.frozen(kw_only=True)
class GenEvalConfig:
    """``[[reward]] name = "geneval"`` options, and ``omni-rl eval --set benchmark.<option>=...``."""

    #: Mask2FormerForUniversalSegmentation (+ its image processor): hub id or local directory
    detector: str = attrs.field(default=DETECTOR, validator=_model_source)
    #: CLIPModel + CLIPProcessor of the colour classifier: hub id or local directory
    clip_model: str = attrs.field(default=CLIP_MODEL, validator=_model_source)
    #: GenEval's ``threshold``: a detection is kept when float32(confidence) > float32(this) (0.3) ...
    threshold: float = attrs.field(default=0.3, converter=float, validator=_confidence)
    #: ... or > this for ``counting`` prompts (GenEval's ``counting_threshold``, 0.9): a spurious box changes the count
    counting_threshold: float = attrs.field(default=0.9, converter=float, validator=_confidence)
    #: GenEval's ``max_objects``: the first this many kept detections per class, cut before NMS (16)
    max_objects: int = attrs.field(default=16, validator=positive_int)
    #: GenEval's ``max_overlap``: a detection whose pixel-inclusive box IoU with a kept, more confident one of its
    #: class is >= this is dropped; exactly 1.0 (the default) is no NMS, above 1 drops nothing
    nms_threshold: float = attrs.field(default=1.0, converter=float, validator=[attrs.validators.gt(0.0)])
    #: GenEval's ``position_threshold``: relations shrink the centre offset by this x the two boxes' sizes (0.1)
    position_threshold: float = attrs.field(default=0.1, converter=float, validator=attrs.validators.ge(0.0))
    #: images per detector forward pass (colour crops are batched the same way)
    batch_size: int = attrs.field(default=16, validator=positive_int)
    #: "auto" (the build context's accelerator, else cuda when visible, else cpu) or a torch device string
    device: str = attrs.field(default="auto", validator=_device)
