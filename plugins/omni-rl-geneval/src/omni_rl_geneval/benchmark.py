"""The ``geneval`` benchmark of ``omni-rl eval``: the 553 official prompts, 4 images each, GenEval's verdicts
and table (the core samples and resumes; this says what is sampled and how it is judged)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from omni_rl.benchmark import BenchmarkSummary, ImageResult, ImageVerdict
from omni_rl.data import PromptRecord
from omni_rl_geneval.config import GenEvalConfig
from omni_rl_geneval.metadata import evaluation_prompts
from omni_rl_geneval.scorer import GenEvalScorer
from omni_rl_geneval.summary import summarize


class GenEvalBenchmark:
    """GenEval as an :class:`omni_rl.benchmark.Benchmark`."""

    #: GenEval's protocol: four images per prompt
    images_per_prompt = 4

    def __init__(self, config: GenEvalConfig, ctx: Any = None) -> None:
        self.scorer = GenEvalScorer(config, ctx, name="geneval benchmark")

    def prompts(self) -> list[PromptRecord]:
        return evaluation_prompts()

    def score(self, images: np.ndarray, records: Sequence[PromptRecord]) -> list[ImageVerdict]:
        verdicts = self.scorer.verdicts(np.asarray(images), [r.metadata for r in records])
        return [ImageVerdict(correct=v.correct, score=v.partial, reason=v.reason) for v in verdicts]

    def summarize(self, results: Sequence[ImageResult]) -> BenchmarkSummary:
        return summarize(results)


def build_geneval_benchmark(config: GenEvalConfig, ctx: Any) -> GenEvalBenchmark:
    return GenEvalBenchmark(config, ctx)
