"""What every model-based reward shares: lazy loading once per process (:mod:`.lazy`), batching, and the call
contract."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np

from omni_rl.batch import RewardResult, check_reward_images
from omni_rl_rewards_clip.config import ModelRewardConfig
from omni_rl_rewards_clip.images import to_pil
from omni_rl_rewards_clip.lazy import LazyModels

if TYPE_CHECKING:
    from PIL import Image

ConfigT = TypeVar("ConfigT", bound=ModelRewardConfig)


class ModelReward(LazyModels, Generic[ConfigT]):
    """Scores images in chunks of ``config.batch_size`` with a model loaded on first use.

    Subclasses set ``name`` (for error messages) and ``sources`` (the options holding a hub id or local path,
    checked when the reward is built), and implement :meth:`load` (returns whatever :meth:`score_chunk` needs:
    models, processor, device) and :meth:`score_chunk`.
    """

    name: str = "model_reward"
    sources: tuple[str, ...] = ("model",)

    config: ConfigT

    def __init__(self, config: ConfigT, ctx: Any = None) -> None:
        super().__init__(config, ctx, self.name, self.sources)

    def score_chunk(
        self, loaded: Any, images: list[Image.Image], prompts: Sequence[str]
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Scores and named sub-scores (float64, one per image) of one chunk of at most ``batch_size`` images."""
        raise NotImplementedError

    def __call__(
        self, images: np.ndarray, prompts: Sequence[str], metadata: Sequence[Mapping[str, Any]]
    ) -> RewardResult:
        import torch

        array = check_reward_images(images, prompts)
        loaded = self.loaded
        size = self.config.batch_size
        scores: list[np.ndarray] = []
        details: dict[str, list[np.ndarray]] = {}
        with torch.inference_mode():
            for start in range(0, len(array), size):
                chunk = to_pil(array[start : start + size])
                chunk_scores, chunk_details = self.score_chunk(loaded, chunk, list(prompts[start : start + size]))
                scores.append(chunk_scores)
                for key, values in chunk_details.items():
                    details.setdefault(key, []).append(values)
        if not scores:
            return RewardResult(scores=np.zeros(0))
        return RewardResult(
            scores=np.concatenate(scores), details={key: np.concatenate(values) for key, values in details.items()}
        )
