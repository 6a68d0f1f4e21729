"""What a reward server refuses to serve: a reward that scores whole videos, which the image protocol cannot
carry (omni_rl.serving.replica.check_servable, called when a replica builds its reward)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ray.serve")

from omni_rl.serving.replica import check_servable


class _VideoReward:
    scores_video = True

    def __call__(self, images: np.ndarray, prompts: list[str], metadata: list[dict]) -> np.ndarray:
        return np.zeros(len(prompts))


class _ImageReward:
    def __call__(self, images: np.ndarray, prompts: list[str], metadata: list[dict]) -> np.ndarray:
        return np.zeros(len(prompts))


def test_a_video_reward_is_refused_with_what_to_do_instead() -> None:
    with pytest.raises(ValueError, match=r"'motion' scores whole videos.*cannot be served.*as a \[\[reward\]\]"):
        check_servable(_VideoReward(), "motion")


def test_an_image_reward_is_served() -> None:
    check_servable(_ImageReward(), "jpeg")
