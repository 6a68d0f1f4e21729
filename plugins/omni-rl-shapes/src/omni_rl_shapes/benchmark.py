"""The ``shapes`` benchmark of ``omni-rl eval``: the 48 val prompts judged by the shapes verifier, reported as the
val reward the pretraining records and RL runs log (mean score; color, count, shape, position and strict).

Its defaults are how a shipped pipeline's recorded val reward was measured (``evaluate.py``), so that
``omni-rl eval <shipped pipeline> --benchmark shapes`` draws the record's images again and prints its number:
2 images per prompt, image j of prompt i seeded ``seed + i + 48 j`` (``--seed`` is the record's ``seed_offset``,
0), and, for a pipeline directory holding a pretraining record, that record's sampling (32 px, 10 Euler steps,
CFG 4.5, 32 text tokens). A run directory is sampled as its validation is, but the trainer draws its val seeds
from ``run.seed`` (``omni_rl.seeding.sample_seeds``), so the number equals a run's ``val/reward/mean`` only up to
the seed noise of 96 images (about ±0.03), not bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from omni_rl.benchmark import BenchmarkSummary, ImageResult, ImageVerdict, SummaryRow
from omni_rl.data import PromptRecord
from omni_rl_shapes import read_prompts
from omni_rl_shapes.config import ShapesRewardConfig
from omni_rl_shapes.evaluate import RECORD_FILE, SamplingSettings, read_record, settings_from_record
from omni_rl_shapes.reward import SUB_SCORES, ShapesReward


class ShapesBenchmark:
    """The shapes val set as an :class:`omni_rl.benchmark.Benchmark` (the verifier's options are its options)."""

    #: the pretraining's val protocol (``SamplingSettings.images_per_prompt``)
    images_per_prompt = SamplingSettings().images_per_prompt

    def __init__(self, config: ShapesRewardConfig | None = None) -> None:
        self.reward = ShapesReward(config)
        self.records = [PromptRecord(prompt) for prompt in read_prompts("val")]

    def prompts(self) -> list[PromptRecord]:
        return list(self.records)

    def image_seed(self, seed: int, index: int, sample: int) -> int:
        """``evaluate.py``'s seeds: image ``sample`` of prompt ``index`` is ``seed + index + sample · 48``."""
        return seed + index + sample * len(self.records)

    def pipeline_overrides(self, directory: Path) -> list[str]:
        """The pretraining record's sampling settings, when ``directory`` holds one (a shipped shapes pipeline)."""
        if not (Path(directory) / RECORD_FILE).is_file():
            return []
        settings = settings_from_record(read_record(directory))
        return [
            f"rollout.options.height={settings.size}",
            f"rollout.options.width={settings.size}",
            f"rollout.options.eval_steps={settings.num_inference_steps}",
            f"rollout.options.eval_cfg={settings.guidance_scale}",
            f"model.options.max_sequence_length={settings.max_sequence_length}",
        ]

    def score(self, images: np.ndarray, records: Sequence[PromptRecord]) -> list[ImageVerdict]:
        result = self.reward(np.asarray(images), [r.prompt for r in records])
        verdicts = []
        for i, score in enumerate(result.scores):
            details = {key: float(result.details[key][i]) for key in SUB_SCORES}
            missed = ", ".join(f"{key} {value:.2g}" for key, value in details.items() if value < 1.0)
            verdicts.append(
                ImageVerdict(
                    correct=bool(result.details["strict"][i]), score=float(score), reason=missed, details=details
                )
            )
        return verdicts

    def summarize(self, results: Sequence[ImageResult]) -> BenchmarkSummary:
        return summarize(results)


def summarize(results: Sequence[ImageResult]) -> BenchmarkSummary:
    """The val reward of ``results``: overall = the mean score (the recorded ``val.score``), one row per sub-score
    (its mean, and how many images have it at 1), % correct images = ``strict``."""
    images = len(results)
    rows = []
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
        "Sub-scores (mean; images with the sub-score at 1)",
        "=================================================",
        *(f"{row.name:<10} = {row.score:.4f} ({row.correct} / {row.total})" for row in rows),
        "",
        f"Val reward (mean score): {overall:.5f}",
    ]
    return BenchmarkSummary(
        benchmark="shapes",
        rows=tuple(rows),
        overall=overall,
        images=images,
        prompts=len(by_prompt),
        correct_images=correct_images,
        correct_prompts=correct_prompts,
        text="\n".join(lines),
    )


def build_shapes_benchmark(config: ShapesRewardConfig, ctx: Any) -> ShapesBenchmark:
    return ShapesBenchmark(config)
