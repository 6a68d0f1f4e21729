"""What every model-based reward shares: lazy loading once per process, batching, and the call contract.

The weights are loaded on the first call, not in ``__init__``: building the reward stays cheap (config checks,
``omni-rl plugins``), the device is chosen in the process that scores (a Ray reward actor sees only its own
GPU), and a reward pickled to another process reloads there instead of shipping gigabytes of tensors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np

from omni_rl.batch import RewardResult, check_reward_images
from omni_rl_rewards_clip.config import ModelRewardConfig
from omni_rl_rewards_clip.images import to_pil
from omni_rl_rewards_clip.loading import Owner, check_source, pick_device

if TYPE_CHECKING:
    from PIL import Image

ConfigT = TypeVar("ConfigT", bound=ModelRewardConfig)


class ModelReward(Generic[ConfigT]):
    """Scores images in chunks of ``config.batch_size`` with a model loaded on first use.

    Subclasses set ``name`` (for error messages) and ``sources`` (the options holding a hub id or local path,
    checked when the reward is built), and implement :meth:`load` (returns whatever :meth:`score_chunk` needs:
    models, processor, device) and :meth:`score_chunk`.
    """

    name: str = "model_reward"
    sources: tuple[str, ...] = ("model",)

    def __init__(self, config: ConfigT, ctx: Any = None) -> None:
        self.config = config
        self.ctx_device: str = getattr(ctx, "device", "cpu")
        #: names the reward's options in errors by their config path ($.reward[1].options.model)
        self.owner = Owner.of(self.name, ctx)
        self._loaded: Any = None
        for option in self.sources:  # a local path that does not exist fails now, not at the first batch
            check_source(getattr(config, option), reward=self.owner, option=option)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_loaded"] = None
        return state

    @property
    def device(self) -> str:
        return pick_device(self.config.device, self.ctx_device)

    @property
    def loaded(self) -> Any:
        """The models, loaded on first access and cached on this instance."""
        if self._loaded is None:
            self._loaded = self.load()
        return self._loaded

    def load(self) -> Any:
        raise NotImplementedError

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
