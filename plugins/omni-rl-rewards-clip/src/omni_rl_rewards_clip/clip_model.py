"""A transformers CLIPModel with its processor on a device, and its L2-normalised embeddings.

Every reward of this plugin is a CLIP model's image/text embeddings plus a formula, so this is the one place
that tokenises, preprocesses and embeds. Prompts are padded to the text model's full context (77 tokens), as
open_clip always does: the result then does not depend on the other prompts in the chunk.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs

from omni_rl_rewards_clip.loading import Owner, load_or_explain, torch_dtype

if TYPE_CHECKING:
    import torch
    from PIL import Image


@attrs.frozen
class LoadedClip:
    """A CLIPModel in eval mode on ``device`` and the CLIPProcessor that prepares its inputs."""

    model: Any
    processor: Any
    device: str
    dtype: Any

    def image_embeddings(self, images: list[Image.Image]) -> torch.Tensor:
        """(N, D) float32 unit vectors of the model's projected image features."""
        pixels = self.processor.image_processor(images=images, return_tensors="pt")["pixel_values"]
        features = self.model.get_image_features(pixel_values=pixels.to(self.device, self.dtype))
        return _unit(_pooled(features))

    def text_embeddings(self, prompts: Sequence[str]) -> torch.Tensor:
        """(N, D) float32 unit vectors of the model's projected text features (prompts truncated to the context)."""
        tokens = self.processor.tokenizer(
            list(prompts),
            padding="max_length",
            truncation=True,
            max_length=self.model.config.text_config.max_position_embeddings,
            return_tensors="pt",
        )
        features = self.model.get_text_features(
            input_ids=tokens["input_ids"].to(self.device), attention_mask=tokens["attention_mask"].to(self.device)
        )
        return _unit(_pooled(features))


def _pooled(features: Any) -> torch.Tensor:
    """transformers >= 5 returns an output object whose ``pooler_output`` is the projection; 4.x the tensor."""
    return getattr(features, "pooler_output", features)


def _unit(features: torch.Tensor) -> torch.Tensor:
    features = features.float()
    return features / features.norm(dim=-1, keepdim=True)


def load_processor(source: str, *, reward: Owner, option: str) -> Any:
    """The CLIPProcessor (tokenizer + image processor) saved at ``source`` (every reward loads it first)."""
    from transformers import CLIPProcessor
    from transformers.utils import logging as transformers_logging

    # Loading bars from a reward actor would interleave with the trainer's own progress bar.
    transformers_logging.disable_progress_bar()

    return load_or_explain(CLIPProcessor.from_pretrained, source, reward=reward, option=option, what="CLIP processor")


def load_clip(
    model_source: str,
    processor_source: str,
    *,
    reward: Owner,
    device: str,
    dtype: str,
    processor_option: str = "model",
) -> LoadedClip:
    """Load ``CLIPModel`` from ``model_source`` (option ``model``) and its processor, on ``device`` in ``dtype``."""
    from transformers import CLIPModel

    processor = load_processor(processor_source, reward=reward, option=processor_option)
    model = load_or_explain(CLIPModel.from_pretrained, model_source, reward=reward, option="model", what="CLIP model")
    return place(model, processor, device=device, dtype=dtype)


def place(model: Any, processor: Any, *, device: str, dtype: str) -> LoadedClip:
    """``model`` frozen, in eval mode, on ``device`` in ``dtype``, wrapped with its processor."""
    torch_type = torch_dtype(dtype)
    model = model.to(device=device, dtype=torch_type).eval().requires_grad_(False)
    return LoadedClip(model=model, processor=processor, device=device, dtype=torch_type)
