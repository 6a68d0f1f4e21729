"""A reward server's handling of condition images (issue 49): a reward that reads them (its GET says
``"reads_conditions": true``) receives each sample's sources aligned with its images, also when Ray Serve merges
requests into one call; another answers a 400 naming the fix before decoding any; the limits count them."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import numpy as np

from omni_rl.batch import RewardResult
from omni_rl.rewards.protocol import PixelLimits, encode_request
from omni_rl.serving.limits import ServeLimits, answer
from omni_rl.serving.replica import Job, score_jobs

RNG = np.random.default_rng(7)
IMAGES = RNG.integers(0, 256, size=(3, 8, 8, 3), dtype=np.uint8)
SOURCES = [RNG.integers(0, 256, size=(6, 5, 3), dtype=np.uint8) for _ in range(2)]
CONDITIONS = [(SOURCES[0],), (SOURCES[0],), (SOURCES[1], SOURCES[0])]
READS = {"reward": "edit", "scores_video": False, "reads_conditions": True}


async def _chunks(body: bytes) -> AsyncIterator[bytes]:
    yield body


def _ask(body: dict[str, Any], describe: dict[str, Any], limits: ServeLimits | None = None) -> tuple[int, dict]:
    seen: dict[str, Any] = {}

    async def score(images: np.ndarray, prompts: list[str], metadata: list[dict], conditions: list) -> dict:
        seen["conditions"] = conditions
        return {"scores": [float(len(c)) for c in conditions] or [0.0] * len(images), "details": {}, "failures": 0}

    data = json.dumps(body).encode()
    headers = {"content-length": str(len(data))}
    status, document = asyncio.run(answer("POST", headers, _chunks(data), limits or ServeLimits(), describe, score))
    document["seen"] = seen.get("conditions")
    return status, document


def test_a_reward_that_reads_conditions_gets_them_aligned() -> None:
    status, document = _ask(encode_request(IMAGES, ["p"] * 3, [{}] * 3, "raw", CONDITIONS), READS)
    assert status == 200 and document["scores"] == [1.0, 1.0, 2.0]
    for got, sent in zip(document["seen"], CONDITIONS, strict=True):
        assert len(got) == len(sent) and all(np.array_equal(a, b) for a, b in zip(got, sent, strict=True))
    # a text-only request to the same reward: empty conditions, the reward decides what that means
    status, document = _ask(encode_request(IMAGES, ["p"] * 3, [{}] * 3), READS)
    assert status == 200 and document["seen"] == []


def test_a_reward_that_does_not_read_conditions_answers_400_naming_the_option() -> None:
    status, document = _ask(encode_request(IMAGES, ["p"] * 3, [{}] * 3, "png", CONDITIONS), {"reward": "pickscore"})
    assert status == 400 and "options.send_conditions = false" in document["error"] and document["seen"] is None


def test_the_limits_count_the_condition_images() -> None:
    limits = ServeLimits(pixels=PixelLimits(per_request=3 * 64 + 2 * 30 - 1))  # one pixel short
    status, document = _ask(encode_request(IMAGES, ["p"] * 3, [{}] * 3, "png", CONDITIONS), READS, limits)
    assert status == 400 and "pixels (this server's limit per request)" in document["error"]
    limits = ServeLimits(pixels=PixelLimits(images=4))  # 3 images + 2 distinct sources
    status, document = _ask(encode_request(IMAGES, ["p"] * 3, [{}] * 3, "png", CONDITIONS), READS, limits)
    assert status == 400 and "holds 5 images (every frame and condition image counted)" in document["error"]


class _SourceBrightness:
    """Scores each image by its first source's mean brightness: the test sees which source reached which sample."""

    reads_conditions = True

    def __call__(self, images: Any, prompts: Any, metadata: Any, conditions: Any) -> RewardResult:
        return RewardResult(np.array([float(c[0].mean()) if c else -1.0 for c in conditions]))


class _ImagesOnly:
    def __call__(self, images: Any, prompts: Any, metadata: Any) -> np.ndarray:  # no conditions keyword
        return np.asarray(images, dtype=np.float64).mean(axis=(1, 2, 3))


def test_merged_requests_keep_each_samples_conditions() -> None:
    jobs = [Job(IMAGES, ["p"] * 3, [{}] * 3, CONDITIONS), Job(IMAGES[:2], ["q"] * 2, [{}] * 2)]
    first, second = score_jobs(_SourceBrightness(), jobs)
    assert isinstance(first, RewardResult) and isinstance(second, RewardResult)
    expected = [SOURCES[0].mean(), SOURCES[0].mean(), SOURCES[1].mean()]
    np.testing.assert_allclose(first.scores, expected)
    np.testing.assert_array_equal(second.scores, [-1.0, -1.0])  # the job that sent none: empty tuples
    (only,) = score_jobs(_ImagesOnly(), [Job(IMAGES, ["p"] * 3, [{}] * 3)])
    np.testing.assert_allclose(np.asarray(only.scores), IMAGES.mean(axis=(1, 2, 3)))
