"""The ``geneval`` reward: per image the fraction of its prompt's requirements met, with GenEval's strict 0/1
and one sub-score per tag as details (Flow-GRPO trains on the partial score and reports the strict one).

The prompt's requirements come from its metadata, which the ``.jsonl`` prompt source passes to rewards
(every key of a line but ``prompt``): train on ``python -m omni_rl_geneval.make_prompts`` output.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from omni_rl.batch import RewardResult, check_reward_images
from omni_rl_geneval.config import GenEvalConfig
from omni_rl_geneval.metadata import TAGS
from omni_rl_geneval.scorer import GenEvalScorer


class GenEvalReward:
    """details: ``strict`` (1 correct / 0), ``partial`` (= the score), and per tag ``<tag>`` (the partial score of
    that tag's images, NaN for the others: the metric averages the images it applies to)."""

    def __init__(self, config: GenEvalConfig, ctx: Any = None) -> None:
        self.scorer = GenEvalScorer(config, ctx)

    def __call__(
        self, images: np.ndarray, prompts: Sequence[str], metadata: Sequence[Mapping[str, Any]]
    ) -> RewardResult:
        array = check_reward_images(images, prompts)
        metadata = list(metadata) if len(metadata) else [{} for _ in prompts]
        verdicts = self.scorer.verdicts(array, metadata)
        scores = np.array([v.partial for v in verdicts], dtype=np.float64)
        details = {"strict": np.array([float(v.correct) for v in verdicts]), "partial": scores.copy()}
        for tag in TAGS:
            details[tag] = np.where([m.get("tag") == tag for m in metadata], scores, np.nan)
        return RewardResult(scores=scores, details=details)


def build_geneval_reward(config: GenEvalConfig, ctx: Any) -> GenEvalReward:
    """Factory of ``geneval``: checks now that the detector and CLIP can be loaded here (offline: that they are
    cached), loads them on the first call."""
    return GenEvalReward(config, ctx)
