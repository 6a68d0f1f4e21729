"""Instance detections from transformers' ``Mask2FormerForUniversalSegmentation`` (COCO instance checkpoint).

Post-processing follows mmdetection's Mask2Former instance head, which GenEval's detector runs: class
probabilities (softmax without the no-object column) of every (query, class) pair, the top ``MAX_PER_IMAGE``
pairs, each pair's mask logits upsampled to the image, binary mask = logit > 0, confidence = class
probability x the mean sigmoid inside the mask, and the box = the binary mask's extent (mmdet's ``mask2bbox``).
transformers' own ``post_process_instance_segmentation`` returns no boxes and merges queries differently, so it
is not used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
from omni_rl_rewards_clip.loading import Owner, load_or_explain

from omni_rl.errors import ConfigError
from omni_rl_geneval.metadata import class_names
from omni_rl_geneval.rules import Detection

if TYPE_CHECKING:
    import torch
    from PIL import Image

#: (query, class) pairs kept per image before thresholds (mmdet's ``max_per_image`` for Mask2Former: 100)
MAX_PER_IMAGE = 100


@attrs.frozen
class LoadedDetector:
    """The model in eval mode on ``device`` and the image processor saved with it."""

    model: Any
    processor: Any
    device: str

    def detect(self, images: list[Image.Image]) -> list[dict[str, list[Detection]]]:
        """Per image, the detections of each class name (unthresholded, at most ``MAX_PER_IMAGE`` in all)."""
        inputs = self.processor(images=images, return_tensors="pt")
        pixels = inputs["pixel_values"].to(self.device, next(self.model.parameters()).dtype)
        outputs = self.model(pixel_values=pixels)
        padded = pixels.shape[-2:]
        pixel_mask = inputs.get("pixel_mask")
        found = []
        for k, image in enumerate(images):
            valid = _valid_size(pixel_mask[k] if pixel_mask is not None else None, padded)
            found.append(
                _image_detections(
                    outputs.class_queries_logits[k].float(),
                    outputs.masks_queries_logits[k].float(),
                    padded,
                    valid,
                    (image.height, image.width),
                )
            )
        return found


def _valid_size(pixel_mask: torch.Tensor | None, padded: tuple[int, int]) -> tuple[int, int]:
    """The resized image's (height, width) inside the padded batch tensor (the processor pads bottom-right)."""
    if pixel_mask is None:
        return int(padded[0]), int(padded[1])
    return int(pixel_mask.any(dim=1).sum()), int(pixel_mask.any(dim=0).sum())


def _image_detections(
    class_logits: torch.Tensor,
    mask_logits: torch.Tensor,
    padded: tuple[int, int],
    valid: tuple[int, int],
    size: tuple[int, int],
) -> dict[str, list[Detection]]:
    import torch
    import torch.nn.functional as F

    names = class_names()
    probabilities = class_logits.softmax(dim=-1)[:, :-1]  # (Q, C): the last column is "no object"
    num_classes = probabilities.shape[1]
    top = min(MAX_PER_IMAGE, probabilities.numel())
    class_scores, flat = probabilities.flatten().topk(top)
    queries, labels = flat // num_classes, flat % num_classes
    masks = F.interpolate(mask_logits[queries][None], size=tuple(padded), mode="bilinear", align_corners=False)
    masks = masks[:, :, : valid[0], : valid[1]]
    masks = F.interpolate(masks, size=size, mode="bilinear", align_corners=False)[0]
    binary = masks > 0
    mask_scores = (masks.sigmoid() * binary).flatten(1).sum(1) / (binary.flatten(1).sum(1) + 1e-6)
    confidences = (class_scores * mask_scores).tolist()
    detections: dict[str, list[Detection]] = {}
    for index in range(top):
        mask = binary[index]
        if not bool(mask.any()):
            continue  # an empty mask has no box; its confidence is 0 anyway
        rows, cols = torch.nonzero(mask.any(dim=1)), torch.nonzero(mask.any(dim=0))
        box = (float(cols[0]), float(rows[0]), float(cols[-1] + 1), float(rows[-1] + 1))
        detection = Detection(box=box, score=float(confidences[index]), mask=mask.cpu().numpy())
        detections.setdefault(names[int(labels[index])], []).append(detection)
    return detections


def load_detector(source: str, *, owner: Owner, device: str) -> LoadedDetector:
    """Mask2Former and its image processor from ``source`` (option ``detector``), checked to have 80 classes."""
    from transformers import AutoImageProcessor, Mask2FormerForUniversalSegmentation
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    processor = load_or_explain(
        AutoImageProcessor.from_pretrained, source, reward=owner, option="detector", what="detector image processor"
    )
    model = load_or_explain(
        Mask2FormerForUniversalSegmentation.from_pretrained, source, reward=owner, option="detector", what="detector"
    )
    labels = int(model.config.num_labels)
    if labels != len(class_names()):
        raise ConfigError(
            f"reward {owner.name!r}: {owner.option('detector')} = {source!r} has {labels} classes, not COCO's 80",
            hint="use a COCO instance-segmentation Mask2Former (e.g. facebook/mask2former-swin-small-coco-instance)",
        )
    model = model.to(device).eval().requires_grad_(False)
    return LoadedDetector(model=model, processor=processor, device=device)
