"""The benchmark records: what a plugin gives ``omni-rl eval --benchmark NAME`` (hook ``omni_rl_benchmarks``).

The core owns the loop every benchmark shares (load the run's or pipeline's model, sample each prompt's images
with fixed seeds, save them, resume where a stopped evaluation left off, write the report files); the benchmark
owns what differs: its prompt set, how one image is judged, and how verdicts become its published table.
Keeping the judging behind this protocol is what lets the core stay free of any benchmark's models.
"""

from __future__ import annotations

from typing import Any

import attrs


@attrs.frozen(kw_only=True)
class ImageVerdict:
    """One image's verdict: GenEval-style benchmarks count ``correct`` images; ``score`` is a graded value
    (partial credit) reported beside it; ``reason`` says why an image failed (shown in the failure grid)."""

    correct: bool
    score: float
    reason: str = ""
    #: named sub-scores of the image (the shapes benchmark's color, count, ...), kept in ``results.jsonl`` so
    #: ``summarize`` can report them without re-scoring
    details: dict[str, float] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ImageResult:
    """A scored image as ``results.jsonl`` records it (one JSON object a line, so a stopped run resumes)."""

    #: the prompt's index in the benchmark's full prompt list (stable under ``--limit``)
    index: int
    #: which of the prompt's images (0 .. images_per_prompt - 1)
    sample: int
    prompt: str
    metadata: dict[str, Any]
    correct: bool
    score: float
    reason: str
    #: the PNG, relative to the output directory
    image: str
    seed: int
    #: the verdict's sub-scores (empty in results written before they existed)
    details: dict[str, float] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class SummaryRow:
    """One line of a benchmark's table: a group of images (GenEval: a tag), its correct count and score."""

    name: str
    correct: int
    total: int
    score: float


@attrs.frozen(kw_only=True)
class BenchmarkSummary:
    """What ``omni-rl eval`` prints and writes: the rows, the headline number, and the benchmark's own text
    layout (GenEval's summary), so the console shows the table a paper's number is read from."""

    benchmark: str
    rows: tuple[SummaryRow, ...]
    overall: float
    images: int
    prompts: int
    correct_images: float
    correct_prompts: float
    text: str


# The protocol itself lives with the other kinds' protocols; imported here for code written against 0.1.0.
from omni_rl.protocols import Benchmark as Benchmark  # noqa: E402
