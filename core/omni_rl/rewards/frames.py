"""Image rewards on videos: each frame scored by the image reward, the frame scores aggregated per video.

The rollout batch of a video model carries ``images`` of shape (N, F, H, W, 3) (docs/hooks.md, "Video"). A reward
says it scores whole videos with a class or instance attribute ``scores_video = True`` and then receives them as
they are; every other reward is an image reward and receives the frames as an (N·k, H, W, 3) batch (the prompt and
metadata of a video repeated for each of its frames), so every image reward (jpeg, pickscore, the shapes verifier, a
reward server behind ``http``) scores videos with no change. The ``[[reward]]`` section's ``aggregate`` turns the
frame scores into the video's: ``"mean"`` over frames, ``"min"`` (the worst frame: a flicker the mean would hide),
or only the ``"first"`` / ``"last"`` frame (only that frame is scored). Sub-scores (``details``) are aggregated the
same way. A reward that reports failed samples reports frames; each failed frame counts its video as failed, at
most N. Image batches (N, H, W, 3) pass through untouched, so wrapping every reward costs image runs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from omni_rl.batch import RewardResult

Aggregate = Literal["mean", "min", "first", "last"]
AGGREGATES: tuple[str, ...] = ("mean", "min", "first", "last")


def scores_video(reward: Any) -> bool:
    """Whether ``reward`` declares that it scores whole (N, F, H, W, 3) videos itself."""
    return bool(getattr(reward, "scores_video", False))


def reads_conditions(reward: Any) -> bool:
    """Whether ``reward`` declares (``reads_conditions = True``) that it reads the condition images (an edit's
    source) and so takes them as the keyword ``conditions``, one tuple of uint8 (H, W, 3) images per sample."""
    return bool(getattr(reward, "reads_conditions", False))


def call_reward(
    reward: Any,
    images: Any,
    prompts: Sequence[str],
    metadata: Sequence[Mapping[str, Any]],
    conditions: Sequence[tuple[np.ndarray, ...]] | None = None,
) -> RewardResult | np.ndarray:
    """``reward(images, prompts, metadata)``, with ``conditions=`` when the reward reads them (an empty tuple per
    sample when the batch has none)."""
    if not reads_conditions(reward):
        return reward(images, prompts, metadata)
    given = list(conditions) if conditions else [() for _ in prompts]
    return reward(images, prompts, metadata, conditions=given)


class FrameRewards:
    """``reward`` applied to videos frame by frame, the frame scores aggregated by ``aggregate``; any other
    attribute is the wrapped reward's."""

    def __init__(self, reward: Any, aggregate: str = "mean") -> None:
        if aggregate not in AGGREGATES:
            raise ValueError(f"aggregate must be one of {', '.join(AGGREGATES)}, got {aggregate!r}")
        self.reward = reward
        self.aggregate = aggregate

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["reward"], name)

    def __call__(
        self,
        images: Any,
        prompts: Sequence[str],
        metadata: Sequence[Mapping[str, Any]],
        conditions: Sequence[tuple[np.ndarray, ...]] | None = None,
    ) -> RewardResult | np.ndarray:
        array = np.asarray(images)
        if array.ndim != 5 or scores_video(self.reward):
            return call_reward(self.reward, images, prompts, metadata, conditions)
        n = array.shape[0]
        frames = {"first": array[:, :1], "last": array[:, -1:]}.get(self.aggregate, array)
        k = frames.shape[1]
        flat = np.ascontiguousarray(frames.reshape(n * k, *frames.shape[2:]))
        repeated_meta = [m for m in metadata for _ in range(k)] if metadata else []
        repeated_conditions = [c for c in conditions for _ in range(k)] if conditions else None
        repeated_prompts = [p for p in prompts for _ in range(k)]
        result = RewardResult.coerce(
            call_reward(self.reward, flat, repeated_prompts, repeated_meta, repeated_conditions)
        )
        return RewardResult(
            scores=self._per_video(result.scores, n, k),
            details={key: self._per_video(value, n, k) for key, value in result.details.items()},
            failures=min(int(result.failures), n),
        )

    def _per_video(self, values: Any, n: int, k: int) -> np.ndarray:
        array = np.asarray(values, dtype=np.float64).reshape(-1)
        if array.size == 1:  # a scalar detail stands for every sample
            return np.full(n, float(array[0]))
        if array.size != n * k:  # the combined reward reports the wrong count against the batch
            return array
        per_frame = array.reshape(n, k)
        return per_frame.min(axis=1) if self.aggregate == "min" else per_frame.mean(axis=1)
