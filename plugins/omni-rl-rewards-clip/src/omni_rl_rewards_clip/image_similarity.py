"""``image_similarity``: how much of its source an edit keeps, as the cosine of two image embeddings
(docs/rewards.md, "image_similarity").

score = cos(ê(output), ê(source)), ê a CLIP model's projected image features (flow_grpo's ``image_similarity``,
weighted 0.2-0.5 beside an instruction reward) or a DINO-family ViT's CLS token (:mod:`.image_encoders`), each
image through the encoder's own processor. With ``source_images = "mean"`` it is the mean of the cosines to each
of the sample's condition images. A preservation term only: "no edit" maximises it, so it is paired with an
instruction term (docs/editing.md, "Which reward").

It reads the condition images (``reads_conditions = True``): the core hands it each sample's sources aligned with
the outputs. The samples of a group share their source, so each distinct source is embedded once per call.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from omni_rl.batch import RewardResult, check_reward_images
from omni_rl_rewards_clip.base import ModelReward
from omni_rl_rewards_clip.config import ImageSimilarityConfig
from omni_rl_rewards_clip.image_encoders import LoadedEncoder, load_encoder

if TYPE_CHECKING:
    import torch

#: why a sample without a source cannot be scored, and what to change
NO_SOURCE = (
    "image_similarity compares each output with its source image, but sample {i} has none (a text-only batch; "
    "the http reward sends the sources only with options.send_conditions = true): train an editing or "
    "image-to-video model on prompt rows with an `image` or `images` field (docs/editing.md), or remove this reward"
)


class ImageSimilarityReward(ModelReward[ImageSimilarityConfig]):
    """Scores each output by its embedding's cosine with its source's (see the module docstring)."""

    name = "image_similarity"
    reads_conditions = True

    def load(self) -> LoadedEncoder:
        config = self.config
        return load_encoder(
            config.model, backbone=config.backbone, reward=self.owner, device=self.device, dtype=config.dtype
        )

    def __call__(
        self,
        images: np.ndarray,
        prompts: Sequence[str],
        metadata: Sequence[Mapping[str, Any]],
        conditions: Sequence[tuple[np.ndarray, ...]] | None = None,
    ) -> RewardResult:
        import torch

        array = check_reward_images(images, prompts)
        distinct, refs = self._sources(conditions, len(array))
        if not len(array):
            return RewardResult(scores=np.zeros(0))
        loaded = self.loaded
        with torch.inference_mode():
            outputs = self._embed(loaded, list(array))
            sources = self._embed(loaded, distinct)
            scores = torch.stack([(sources[r] @ outputs[i]).mean() for i, r in enumerate(refs)])
        return RewardResult(scores=scores.double().cpu().numpy())

    def _sources(
        self, conditions: Sequence[tuple[np.ndarray, ...]] | None, n: int
    ) -> tuple[list[np.ndarray], list[list[int]]]:
        """The distinct source images the batch compares with, and per sample the indices of its own (its first,
        or all of them with ``source_images = "mean"``); a sample without any is a ValueError saying what to do."""
        given = list(conditions or [])
        if n and not given:
            raise ValueError(NO_SOURCE.format(i=0))
        if len(given) != n:
            raise ValueError(f"image_similarity got {len(given)} samples' condition images for {n} images")
        distinct: list[np.ndarray] = []
        index: dict[tuple[tuple[int, ...], bytes], int] = {}
        refs: list[list[int]] = []
        for i, sample in enumerate(given):
            if not len(sample):
                raise ValueError(NO_SOURCE.format(i=i))
            chosen = sample[:1] if self.config.source_images == "first" else sample
            own = []
            for image in chosen:
                source = np.ascontiguousarray(image, dtype=np.uint8)
                if source.ndim != 3 or source.shape[-1] != 3:
                    raise ValueError(
                        f"image_similarity: sample {i}'s condition image has shape {source.shape}, not (H, W, 3)"
                    )
                key = (source.shape, hashlib.blake2b(source.tobytes(), digest_size=16).digest())
                if key not in index:
                    index[key] = len(distinct)
                    distinct.append(source)
                own.append(index[key])
            refs.append(own)
        return distinct, refs

    def _embed(self, loaded: LoadedEncoder, images: list[np.ndarray]) -> torch.Tensor:
        """(M, D) unit embeddings of ``images`` (any sizes), ``batch_size`` per forward pass."""
        import torch
        from PIL import Image

        size = self.config.batch_size
        chunks = [images[start : start + size] for start in range(0, len(images), size)]
        return torch.cat([loaded.embeddings([Image.fromarray(image) for image in chunk]) for chunk in chunks])


def build_image_similarity(config: ImageSimilarityConfig, ctx: Any) -> ImageSimilarityReward:
    """Factory of ``image_similarity``: checks a local path now, loads the encoder on the first call."""
    return ImageSimilarityReward(config, ctx)
