"""``pickscore``: PickScore_v1 (Kirstain et al. 2023), a CLIP ViT-H-14 fine-tuned on Pick-a-Pic
preferences (docs/math.md#clip-based-rewards).

score = exp(logit_scale) * cos(image, prompt) / scale, the model's own logit (its learned temperature times the
cosine of its projected, L2-normalised embeddings) divided by ``scale`` (26 in Flow-GRPO and VeRL-Omni).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from omni_rl_rewards_clip.base import ModelReward
from omni_rl_rewards_clip.clip_model import LoadedClip, load_clip
from omni_rl_rewards_clip.config import PickScoreConfig

if TYPE_CHECKING:
    from PIL import Image


class PickScoreReward(ModelReward[PickScoreConfig]):
    """details: ``cosine`` (the cosine before the temperature and ``scale``)."""

    name = "pickscore"
    sources = ("model", "processor")

    def load(self) -> LoadedClip:
        config = self.config
        return load_clip(
            config.model,
            config.processor,
            reward=self.owner,
            device=self.device,
            dtype=config.dtype,
            processor_option="processor",
        )

    def score_chunk(
        self, loaded: LoadedClip, images: list[Image.Image], prompts: Sequence[str]
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        cosine = (loaded.image_embeddings(images) * loaded.text_embeddings(prompts)).sum(dim=-1)
        temperature = loaded.model.logit_scale.float().exp()
        scores = temperature * cosine / self.config.scale
        return scores.double().cpu().numpy(), {"cosine": cosine.double().cpu().numpy()}


def build_pickscore(config: PickScoreConfig, ctx: Any) -> PickScoreReward:
    """Factory of ``pickscore``: checks local paths now, loads the weights on the first call."""
    return PickScoreReward(config, ctx)
