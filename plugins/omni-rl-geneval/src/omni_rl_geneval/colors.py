"""GenEval's colour classifier: CLIP ViT-L/14 zero-shot over the ten colours on each object's masked crop.

Each object is cut out as GenEval does: the image composited over a #999 grey background through the object's
mask, then cropped to its box. The classifier's weights per class name are clip_benchmark's zero-shot
classifier: for each colour, the three templates' normalised text embeddings averaged and normalised again;
the predicted colour is the argmax of image embedding x weights. Weights are cached per class name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from omni_rl_geneval.metadata import COLOR_TEMPLATES, COLORS
from omni_rl_geneval.rules import Detection

if TYPE_CHECKING:
    import torch
    from omni_rl_rewards_clip.clip_model import LoadedClip
    from PIL import Image

#: GenEval's crop background (its ``bgcolor`` option's default)
BACKGROUND = (0x99, 0x99, 0x99)


def masked_crop(image: Image.Image, detection: Detection) -> Image.Image:
    """The object over grey (through its mask when it has one), cropped to its box."""
    from PIL import Image

    image = image.convert("RGB")
    if detection.mask is not None:
        blank = Image.new("RGB", image.size, BACKGROUND)
        mask = Image.fromarray(np.asarray(detection.mask, dtype=np.uint8) * 255)
        image = Image.composite(image, blank, mask)
    # GenEval crops to its float32 box, which Pillow rounds (half to even) to whole pixels
    return image.crop(tuple(round(float(np.float32(v))) for v in detection.box))


class ColorClassifier:
    """Colours of detections of one image batch, on a loaded CLIP (``omni_rl_rewards_clip.clip_model``)."""

    def __init__(self, clip: LoadedClip, batch_size: int) -> None:
        self.clip = clip
        self.batch_size = batch_size
        self._weights: dict[str, Any] = {}

    def weights(self, classname: str) -> torch.Tensor:
        """(D, 10) zero-shot weights of the colours of ``classname``."""
        if classname not in self._weights:
            columns = []
            for color in COLORS:
                texts = [template.format(c=color, o=classname) for template in COLOR_TEMPLATES]
                embedded = self.clip.text_embeddings(texts).mean(dim=0)
                columns.append(embedded / embedded.norm())
            import torch

            self._weights[classname] = torch.stack(columns, dim=1)
        return self._weights[classname]

    def __call__(self, image: Image.Image, classname: str, detections: Sequence[Detection]) -> list[str]:
        """One colour name per detection."""
        import torch

        crops = [masked_crop(image, detection) for detection in detections]
        logits = []
        for start in range(0, len(crops), self.batch_size):
            embedded = self.clip.image_embeddings(crops[start : start + self.batch_size])
            logits.append(100.0 * embedded @ self.weights(classname))
        if not logits:
            return []
        return [COLORS[int(i)] for i in torch.cat(logits).argmax(dim=1)]
