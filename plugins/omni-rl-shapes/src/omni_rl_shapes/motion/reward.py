"""The ``shapes_motion`` reward: the clip verifier applied to a batch of videos.

It declares ``scores_video = True`` (docs/hooks.md, "Video"), so the core hands it whole clips (N, F, H, W, 3)
instead of scoring frame by frame: motion and consistency are properties of a clip, not of any frame.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from omni_rl.batch import RewardResult
from omni_rl.errors import RuntimeFailure
from omni_rl_shapes.motion.config import ShapesMotionRewardConfig
from omni_rl_shapes.motion.scenes import MotionScene, parse_motion_prompt
from omni_rl_shapes.motion.verify import verify_clip

#: sub-scores reported in RewardResult.details, besides ``strict``
SUB_SCORES: tuple[str, ...] = ("frame", "motion", "consistency")


@lru_cache(maxsize=4096)
def _scene(prompt: str) -> MotionScene:
    try:
        return parse_motion_prompt(prompt)
    except ValueError as exc:
        raise RuntimeFailure(
            f"the shapes_motion reward cannot score prompt {prompt!r}: it is not in the shapes-in-motion grammar",
            hint="use prompts such as 'a red circle moving to the right' or 'a blue square above a green triangle, "
            "both moving down' (omni_rl_shapes.motion.scenes)",
        ) from exc


class ShapesMotionReward:
    """Scores clips against motion prompts: one float in [0, 1] per clip plus the three sub-scores."""

    #: whole clips, never frame by frame (omni_rl.rewards.frames)
    scores_video = True

    def __init__(self, config: ShapesMotionRewardConfig | None = None) -> None:
        self.config = config if config is not None else ShapesMotionRewardConfig()

    def __call__(
        self, videos: np.ndarray, prompts: Sequence[str], metadata: Sequence[Mapping[str, Any]] = ()
    ) -> RewardResult:
        videos = np.asarray(videos)
        if videos.ndim != 5 or videos.shape[-1] != 3 or videos.dtype != np.uint8:
            raise ValueError(
                f"shapes_motion scores uint8 clips of shape (N, F, H, W, 3), got {videos.dtype} {videos.shape}; "
                "sample with a video model ([rollout] options.num_frames > 1)"
            )
        if len(videos) != len(prompts):
            raise ValueError(f"{len(videos)} clips but {len(prompts)} prompts")
        n = len(prompts)
        scores = np.zeros(n)
        details = {k: np.zeros(n) for k in (*SUB_SCORES, "strict")}
        for i, (clip, prompt) in enumerate(zip(videos, prompts, strict=True)):
            verdict = verify_clip(clip, _scene(prompt), self.config)
            scores[i] = verdict.score
            for k in SUB_SCORES:
                details[k][i] = getattr(verdict, k)
            details["strict"][i] = float(verdict.strict)
        return RewardResult(scores=scores, details=details)
