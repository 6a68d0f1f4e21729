"""Image-only encoders for image-to-image similarity: a CLIP model's projected image features, or a DINO-family
ViT's CLS token, each behind its own image processor, as L2-normalised float32 vectors.

* ``clip``: ``CLIPModel.get_image_features`` (what flow_grpo's ``image_similarity`` embeds), or
  ``CLIPVisionModelWithProjection``'s ``image_embeds`` for a vision-only checkpoint: the same projection.
* ``dino``: ``AutoModel`` of a DINOv2 / DINOv2-with-registers / DINOv3 / DINO v1 (``vit``) checkpoint, and the CLS
  token of its ``last_hidden_state`` after the final layer norm: what the DINO similarity of DreamBooth and of the
  editing benchmarks compares, and exactly what ``Dinov2Model`` returns as ``pooler_output``. ViTModel's own
  ``pooler_output`` is not used: it is a tanh head that DINO checkpoints do not train.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from omni_rl.errors import ConfigError
from omni_rl_rewards_clip.loading import Owner, load_or_explain, torch_dtype

if TYPE_CHECKING:
    import torch
    from PIL import Image

#: model types each backbone loads (``config.json``'s ``model_type``)
CLIP_TYPES: tuple[str, ...] = ("clip", "clip_vision_model")
DINO_TYPES: tuple[str, ...] = ("dinov2", "dinov2_with_registers", "dinov3_vit", "vit")


@attrs.frozen
class LoadedEncoder:
    """An image encoder in eval mode on ``device`` and the image processor that prepares its inputs."""

    backbone: str
    model: Any
    processor: Any
    device: str
    dtype: Any

    def embeddings(self, images: list[Image.Image]) -> torch.Tensor:
        """(N, D) float32 unit vectors, one per image (any sizes: the processor resizes and crops each)."""
        pixels = self.processor(images=images, return_tensors="pt")["pixel_values"].to(self.device, self.dtype)
        if self.backbone == "dino":
            features = self.model(pixel_values=pixels).last_hidden_state[:, 0]
        elif hasattr(self.model, "get_image_features"):
            features = self.model.get_image_features(pixel_values=pixels)
            features = getattr(features, "pooler_output", features)  # transformers >= 5: an output object
        else:  # CLIPVisionModelWithProjection
            features = self.model(pixel_values=pixels).image_embeds
        features = features.float()
        return features / features.norm(dim=-1, keepdim=True)


def load_encoder(source: str, *, backbone: str, reward: Owner, device: str, dtype: str) -> LoadedEncoder:
    """The ``backbone`` encoder and its image processor saved at ``source`` (option ``model``), frozen, on
    ``device`` in ``dtype``; a checkpoint of another family is a ConfigError naming ``backbone``."""
    from transformers import AutoConfig, AutoImageProcessor, AutoModel, CLIPModel, CLIPVisionModelWithProjection
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # a reward actor's bars would interleave with the trainer's
    config = load_or_explain(AutoConfig.from_pretrained, source, reward=reward, option="model", what="model config")
    model_type = getattr(config, "model_type", "")
    allowed = CLIP_TYPES if backbone == "clip" else DINO_TYPES
    if model_type not in allowed:
        other = "dino" if backbone == "clip" else "clip"
        raise ConfigError(
            f"reward {reward.name!r}: {reward.option('model')} = {source!r} is a {model_type!r} model, which the "
            f"{backbone!r} backbone does not load (it takes {', '.join(allowed)})",
            hint=f"point {reward.option('model')} at a {backbone.upper()} checkpoint, or set "
            f'{reward.option("backbone")} = "{other}" if that is what it is',
        )
    if backbone == "dino":
        loader: Any = AutoModel
    else:
        loader = CLIPModel if model_type == "clip" else CLIPVisionModelWithProjection
    model = load_or_explain(loader.from_pretrained, source, reward=reward, option="model", what=f"{backbone} model")
    processor = load_or_explain(
        AutoImageProcessor.from_pretrained, source, reward=reward, option="model", what="image processor"
    )
    torch_type = torch_dtype(dtype)
    model = model.to(device=device, dtype=torch_type).eval().requires_grad_(False)
    return LoadedEncoder(backbone=backbone, model=model, processor=processor, device=device, dtype=torch_type)
