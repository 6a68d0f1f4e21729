"""The Qwen2.5-VL inputs of Qwen-Image-Edit's prompts, built without ``Qwen2VLProcessor``, and their cache.

``QwenImageEditPipeline`` and ``QwenImageEditPlusPipeline`` encode a prompt with the condition image(s) through
``self.processor``, a transformers ``Qwen2VLProcessor``: its image processor turns each image into patches
(``pixel_values``) and a (t, h, w) patch grid (``image_grid_thw``), and each ``<|image_pad|>`` of the text becomes
``prod(grid) // merge_size**2`` pad tokens before tokenising. Without torchvision ``Qwen2VLProcessor`` cannot even be
constructed (transformers resolves its video processor class, which needs torchvision), and so the pipelines'
``from_pretrained`` fails on their ``processor`` folder. :class:`VisionTextProcessor` is a stand-in that computes the
same four tensors from the two parts that do load, the folder's ``Qwen2VLImageProcessor`` and its tokenizer, with
:func:`vision_text_inputs`, a pure function of those inputs. The model sets it as the pipeline's ``processor``, so
prompts are still encoded by the pipeline's own ``encode_prompt`` (template, "Picture k:" prefixes, the 64
dropped template tokens, the last hidden layer), and tests hand it to the pipeline to run ``__call__``.

Where torchvision is installed ``Qwen2VLImageProcessor`` is transformers' torchvision backend, as in the real
processor; without it the PIL backend (``Qwen2VLImageProcessorPil``), the one the real processor would fall back
to. The token ids depend only on the grid, which both backends compute with the same ``smart_resize``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from omni_rl_pipelines.prompt_cache import NEGATIVE, POSITIVE, CachedPromptEncoder

if TYPE_CHECKING:
    from PIL import Image

__all__ = [
    "NEGATIVE",
    "POSITIVE",
    "EditPromptEncoder",
    "VisionTextProcessor",
    "image_processor_class",
    "vision_text_inputs",
]

#: the placeholder the pipelines' templates hold once per image (Qwen2VLProcessor's ``image_token``)
IMAGE_TOKEN = "<|image_pad|>"


def image_processor_class() -> Any:
    """``Qwen2VLImageProcessor`` where torchvision is installed (the backend the real processor loads), else its
    PIL backend, which transformers would fall back to with a warning on every load."""
    import transformers

    if importlib.util.find_spec("torchvision") is not None:
        return transformers.Qwen2VLImageProcessor
    return transformers.Qwen2VLImageProcessorPil


def vision_text_inputs(
    tokenizer: Any, image_processor: Any, texts: Sequence[str], images: Sequence[Image.Image]
) -> dict[str, torch.Tensor]:
    """What ``Qwen2VLProcessor(text=texts, images=images, padding=True, return_tensors="pt")`` returns for the
    pipelines: ``input_ids``, ``attention_mask``, ``pixel_values`` and ``image_grid_thw``.

    The i-th ``<|image_pad|>`` across ``texts`` (in order) stands for ``images[i]`` and becomes
    ``prod(image_grid_thw[i]) // merge_size**2`` pad tokens, as the processor's replacement does; then the texts
    are tokenised together, padded to the longest."""
    texts = list(texts)
    count = sum(text.count(IMAGE_TOKEN) for text in texts)
    if count != len(images):
        raise ValueError(f"the texts hold {count} {IMAGE_TOKEN} placeholders for {len(images)} images")
    inputs: dict[str, torch.Tensor] = {}
    replacements: list[str] = []
    if images:
        processed = image_processor(images=list(images), return_tensors="pt")
        inputs["pixel_values"] = processed["pixel_values"]
        inputs["image_grid_thw"] = processed["image_grid_thw"]
        merge = int(image_processor.merge_size) ** 2
        replacements = [IMAGE_TOKEN * (int(grid.prod()) // merge) for grid in processed["image_grid_thw"]]
    pending = iter(replacements)
    expanded = [re.sub(re.escape(IMAGE_TOKEN), lambda _: next(pending), text) for text in texts]
    tokens = tokenizer(expanded, padding=True, return_tensors="pt")
    return {"input_ids": tokens["input_ids"], "attention_mask": tokens["attention_mask"], **inputs}


class VisionTextProcessor:
    """A stand-in for the pipelines' ``Qwen2VLProcessor``: called as they call it, it returns the same tensors
    (:func:`vision_text_inputs`) as a ``BatchFeature``. Loaded from a pipeline's ``processor`` folder (its
    ``preprocessor_config.json`` and tokenizer files) by :meth:`from_pretrained`."""

    def __init__(self, image_processor: Any, tokenizer: Any) -> None:
        self.image_processor = image_processor
        self.tokenizer = tokenizer

    @classmethod
    def from_pretrained(cls, directory: str | Path) -> VisionTextProcessor:
        from transformers import AutoTokenizer

        image_processor = image_processor_class().from_pretrained(str(directory))
        return cls(image_processor, AutoTokenizer.from_pretrained(str(directory)))

    def __call__(
        self,
        text: str | Sequence[str],
        images: Image.Image | Sequence[Image.Image] | None = None,
        padding: bool = True,
        return_tensors: str = "pt",
        **_: Any,
    ) -> Any:
        from transformers import BatchFeature

        if return_tensors != "pt" or not padding:
            raise ValueError("VisionTextProcessor returns padded torch tensors only (what the edit pipelines ask for)")
        texts = [text] if isinstance(text, str) else list(text)
        if images is None:
            images = []
        elif not isinstance(images, list | tuple):
            images = [images]
        return BatchFeature(vision_text_inputs(self.tokenizer, self.image_processor, texts, images))


def image_digest(image: Image.Image) -> str:
    """A PIL image by value (size and pixel bytes): the prompt cache's key part for each VLM image."""
    pixels = np.asarray(image.convert("RGB"))
    return f"{pixels.shape}:{hashlib.sha1(np.ascontiguousarray(pixels).data).hexdigest()}"


class EditPromptEncoder(CachedPromptEncoder[torch.Tensor]):
    """The pipeline's own ``encode_prompt(prompt, image=...)`` for one (prompt, VLM images) pair at a time, cached
    on the CPU under the prompt and the images' digests (an edit set pairs one instruction with many sources, and
    every step's negative prompt with the step's sources).

    ``image_as_list``: Plus pipelines get the images as a list (the "Picture k:" form, even for one image); the
    Edit pipeline gets its single image alone, as their ``__call__`` passes them."""

    def __init__(self, pipeline: Any, *, image_as_list: bool, **options: Any) -> None:
        super().__init__(pipeline, **options)
        self.image_as_list = image_as_list
        self._images: dict[str, list[Image.Image]] = {}

    def _encoders(self) -> list[torch.nn.Module]:
        return [self.pipeline.text_encoder]

    def _encode_one(self, key: str) -> torch.Tensor:
        prompt = key.split("\x00", 1)[0]
        images = self._images[key]
        embeds, mask = self.pipeline.encode_prompt(
            prompt=[prompt], image=images if self.image_as_list else images[0], device=self.device
        )
        if mask is not None:  # one prompt has no padding; the pipeline drops an all-ones mask
            embeds = embeds[:, : int(mask.sum())]
        return embeds[0].detach().cpu()

    def encode(self, prompts: Sequence[str], images: Sequence[Sequence[Image.Image]]) -> list[torch.Tensor]:
        """One (L_i, D) embedding per (prompt, images) pair, on the CPU. The negative prompt is cached like any
        other pair: its entries differ with the images, so none is pinned."""
        keys = [p + "\x00" + "|".join(image_digest(i) for i in imgs) for p, imgs in zip(prompts, images, strict=True)]
        self._images = {key: list(imgs) for key, imgs in zip(keys, images, strict=True)}
        try:
            return self.rows(keys)
        finally:
            self._images = {}
