"""GenEval's report from per-image results: its ``summary_scores.py`` layout and numbers (docs/math.md#geneval).

As that script computes them: images counted; prompts counted (distinct prompts); % correct images (over all
images); % correct prompts: a prompt is correct when ANY of its images is; per tag, in the order the tags first
appear in the results (the set's order), the fraction of that tag's images that are correct; overall, the plain
mean of those per-tag fractions (``np.mean``, each tag weighted equally, not by its image count).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from omni_rl.benchmark import BenchmarkSummary, ImageResult, SummaryRow


def summarize(results: Sequence[ImageResult], benchmark: str = "geneval") -> BenchmarkSummary:
    """The summary of ``results`` (every image of the evaluated prompts, in prompt order)."""
    by_tag: dict[str, list[bool]] = {}
    for r in results:
        by_tag.setdefault(str(r.metadata.get("tag")), []).append(bool(r.correct))
    rows = [
        SummaryRow(name=tag, correct=sum(marks), total=len(marks), score=sum(marks) / len(marks))
        for tag, marks in by_tag.items()
    ]
    overall = float(np.mean([row.score for row in rows])) if rows else 0.0
    by_prompt: dict[int, bool] = {}
    for r in results:
        by_prompt[r.index] = by_prompt.get(r.index, False) or bool(r.correct)
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
