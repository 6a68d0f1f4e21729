"""``clip_score``: the cosine of a CLIP model's image and prompt embeddings, and CLIP-S (Hessel et al. 2021;
docs/math.md#clip-based-rewards).

score = factor * cos(image, prefix + prompt), with cos replaced by max(cos, 0) when ``clamp_at_zero``;
CLIP-S is factor 2.5, clamped, prefix "A photo depicts ".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from omni_rl_rewards_clip.base import ModelReward
from omni_rl_rewards_clip.clip_model import LoadedClip, load_clip
from omni_rl_rewards_clip.config import ClipScoreConfig

if TYPE_CHECKING:
    from PIL import Image


class ClipScoreReward(ModelReward[ClipScoreConfig]):
    """details: ``cosine`` (before the clamp and factor)."""

    name = "clip_score"

    def load(self) -> LoadedClip:
        config = self.config
        return load_clip(config.model, config.model, reward=self.owner, device=self.device, dtype=config.dtype)

    def score_chunk(
        self, loaded: LoadedClip, images: list[Image.Image], prompts: Sequence[str]
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        texts = [self.config.prompt_prefix + prompt for prompt in prompts]
        cosine = (loaded.image_embeddings(images) * loaded.text_embeddings(texts)).sum(dim=-1)
        kept = cosine.clamp(min=0.0) if self.config.clamp_at_zero else cosine
        scores = self.config.factor * kept
        return scores.double().cpu().numpy(), {"cosine": cosine.double().cpu().numpy()}


def build_clip_score(config: ClipScoreConfig, ctx: Any) -> ClipScoreReward:
    """Factory of ``clip_score``: checks a local path now, loads the weights on the first call."""
    return ClipScoreReward(config, ctx)
