"""GenEval's report from per-image results: its ``summary_scores.py`` layout and numbers.

Per tag, the fraction of correct images; overall, the mean over the tags present (the six tags for the full
set); and the counts GenEval prints first: images, prompts, % correct images, % correct prompts (a prompt is
correct when all of its images are).
"""

from __future__ import annotations

from collections.abc import Sequence

from omni_rl.benchmark import BenchmarkSummary, ImageResult, SummaryRow
from omni_rl_geneval.metadata import TAGS


def summarize(results: Sequence[ImageResult], benchmark: str = "geneval") -> BenchmarkSummary:
    """The summary of ``results`` (every image of the evaluated prompts)."""
    rows = []
    for tag in TAGS:
        tagged = [r for r in results if r.metadata.get("tag") == tag]
        if tagged:
            correct = sum(r.correct for r in tagged)
            rows.append(SummaryRow(name=tag, correct=correct, total=len(tagged), score=correct / len(tagged)))
    overall = sum(row.score for row in rows) / len(rows) if rows else 0.0
    by_prompt: dict[int, bool] = {}
    for r in results:
        by_prompt[r.index] = by_prompt.get(r.index, True) and r.correct
    images, prompts = len(results), len(by_prompt)
    correct_images = sum(r.correct for r in results) / images if images else 0.0
    correct_prompts = sum(by_prompt.values()) / prompts if prompts else 0.0
    lines = [
        "Summary",
        "=======",
        f"Total images: {images}",
        f"Total prompts: {prompts}",
        f"% correct images: {correct_images:.2%}",
        f"% correct prompts: {correct_prompts:.2%}",
        "",
        "Task breakdown",
        "==============",
        *(f"{row.name:<16} = {row.score:.2%} ({row.correct} / {row.total})" for row in rows),
        "",
        f"Overall score (avg. over tasks): {overall:.5f}",
    ]
    return BenchmarkSummary(
        benchmark=benchmark,
        rows=tuple(rows),
        overall=overall,
        images=images,
        prompts=prompts,
        correct_images=correct_images,
        correct_prompts=correct_prompts,
        text="\n".join(lines),
    )
