"""The ``shapes_edit`` benchmark of ``omni-rl eval``: the 48 val (or test) edit tasks, each a source image and an
instruction, judged by the ``shapes_edit`` reward and summarised per edit kind and overall.

The prompt records carry their source image (``PromptRecord.images``), which the eval loop decodes into the
rollout request's ``conditions`` so an editing model sees what it edits; :meth:`ShapesEditBenchmark.score` hands
the same source to the reward, which measures the untouched objects on it. Overall = the mean score (edit x
preserve); ``% correct`` = strict.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

from omni_rl.benchmark import BenchmarkSummary, ImageResult, ImageVerdict, SummaryRow
from omni_rl.data import PromptRecord, read_prompt_source
from omni_rl.data_images import records_conditions
from omni_rl_shapes.edit.config import ShapesEditBenchmarkConfig, ShapesEditRewardConfig
from omni_rl_shapes.edit.reward import SUB_SCORES, ShapesEditReward
from omni_rl_shapes.edit.tasks import EDIT_KINDS


def task_source(split: str) -> str:
    """The prompt source of a shipped split (``[data] train`` / ``val`` take the same string)."""
    return f"package:omni_rl_shapes:edit/tasks/{split}.jsonl"


class ShapesEditBenchmark:
    """The shapes edit val (or test) split as an :class:`omni_rl.protocols.Benchmark`."""

    images_per_prompt = 2

    def __init__(self, config: ShapesEditBenchmarkConfig | None = None) -> None:
        config = config if config is not None else ShapesEditBenchmarkConfig()
        fields = {f.name for f in attrs.fields(ShapesEditRewardConfig)}
        self.reward = ShapesEditReward(ShapesEditRewardConfig(**{k: getattr(config, k) for k in fields}))
        self.split = config.split
        self.records = read_prompt_source(task_source(config.split), config_path="$.benchmark.options.split")

    def prompts(self) -> list[PromptRecord]:
        return list(self.records)

    def score(self, images: np.ndarray, records: Sequence[PromptRecord]) -> list[ImageVerdict]:
        conditions = records_conditions(records) or [() for _ in records]  # each task's source, decoded once
        result = self.reward(
            np.asarray(images), [r.prompt for r in records], [r.metadata for r in records], conditions=conditions
        )
        verdicts = []
        for i, score in enumerate(result.scores):
            details = {key: float(result.details[key][i]) for key in SUB_SCORES}
            missed = ", ".join(f"{key} {value:.2g}" for key, value in details.items() if value < 1.0)
            kind = str(records[i].metadata.get("kind", "?"))
            verdicts.append(
                ImageVerdict(
                    correct=bool(result.details["strict"][i]),
                    score=float(score),
                    reason=f"{kind}: {missed}" if missed else "",
                    details=details,
                )
            )
        return verdicts

    def summarize(self, results: Sequence[ImageResult]) -> BenchmarkSummary:
        return summarize(results)


def summarize(results: Sequence[ImageResult]) -> BenchmarkSummary:
    """One row per edit kind (mean score, images strict) and per sub-score; overall = the mean score."""
    images = len(results)
    rows = []
    for kind in EDIT_KINDS:
        mine = [r for r in results if r.metadata.get("kind") == kind]
        if mine:
            score = float(np.mean([r.score for r in mine]))
            rows.append(SummaryRow(name=kind, correct=sum(r.correct for r in mine), total=len(mine), score=score))
    for key in SUB_SCORES:
        values = [r.details[key] for r in results if key in r.details]
        if values:
            correct = sum(value >= 1.0 for value in values)
            rows.append(SummaryRow(name=key, correct=correct, total=len(values), score=float(np.mean(values))))
    overall = float(np.mean([r.score for r in results])) if images else 0.0
    by_prompt: dict[int, bool] = {}
    for r in results:
        by_prompt[r.index] = by_prompt.get(r.index, True) and r.correct
    correct_images = sum(r.correct for r in results) / images if images else 0.0
    correct_prompts = sum(by_prompt.values()) / len(by_prompt) if by_prompt else 0.0
    lines = [
        "Summary",
        "=======",
        f"Total images: {images}",
        f"Total prompts: {len(by_prompt)}",
        f"% correct images (strict): {correct_images:.2%}",
        f"% correct prompts: {correct_prompts:.2%}",
        "",
        "Per edit kind, then sub-score (mean; images strict / at 1)",
        "==========================================================",
        *(f"{row.name:<10} = {row.score:.4f} ({row.correct} / {row.total})" for row in rows),
        "",
        f"Edit reward (mean score): {overall:.5f}",
    ]
    return BenchmarkSummary(
        benchmark="shapes_edit",
        rows=tuple(rows),
        overall=overall,
        images=images,
        prompts=len(by_prompt),
        correct_images=correct_images,
        correct_prompts=correct_prompts,
        text="\n".join(lines),
    )


def build_shapes_edit_benchmark(config: ShapesEditBenchmarkConfig, ctx: Any) -> ShapesEditBenchmark:
    return ShapesEditBenchmark(config)
