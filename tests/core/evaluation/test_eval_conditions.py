"""``run_eval`` hands each prompt record's condition images (an edit benchmark's sources) to the rollout as the
request's ``conditions``, decoded as the trainer decodes them, and keeps a text-only request text-only."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np
from PIL import Image

from omni_rl.batch import RolloutBatch
from omni_rl.benchmark import BenchmarkSummary, ImageResult, ImageVerdict
from omni_rl.data import PromptRecord
from omni_rl.data_images import ImageRef, records_conditions
from omni_rl.evaluation.generator import Generator
from omni_rl.evaluation.loop import EvalSettings, run_eval


class Sources:
    images_per_prompt = 2

    def __init__(self, records: list[PromptRecord]) -> None:
        self.records = records

    def prompts(self) -> list[PromptRecord]:
        return self.records

    def score(self, images: np.ndarray, records: Sequence[PromptRecord]) -> list[ImageVerdict]:
        return [ImageVerdict(correct=True, score=1.0) for _ in images]

    def summarize(self, results: Sequence[ImageResult]) -> BenchmarkSummary:
        prompts = len({r.index for r in results})
        return BenchmarkSummary(
            benchmark="sources",
            rows=(),
            overall=1.0,
            images=len(results),
            prompts=prompts,
            correct_images=1.0,
            correct_prompts=1.0,
            text="ok",
        )


@attrs.define
class Recorder:
    conditions: list[Any] = attrs.field(factory=list)

    def generate(self, model: Any, sampler: Any, request: Any) -> RolloutBatch:
        import torch

        self.conditions.append(request.conditions)
        n = len(request.prompts)
        return RolloutBatch(
            prompts=request.prompts,
            group_ids=torch.tensor(request.group_ids),
            seeds=torch.tensor(request.seeds),
            images=torch.zeros(n, 4, 4, 3, dtype=torch.uint8),
            final_latents=torch.zeros(n, 1, 1, 1),
            conditioning=None,  # type: ignore[arg-type]
        )


def _png(path: Path, value: int) -> ImageRef:
    Image.fromarray(np.full((6, 5, 3), value, np.uint8)).save(path)
    return ImageRef(str(path), path=path)


def _run(tmp_path: Path, records: list[PromptRecord]) -> Recorder:
    recorder = Recorder()
    generator = Generator(model=None, sampler=None, rollout=recorder, info={"target": "/x", "kind": "pipeline"})
    run_eval(
        Sources(records), generator, tmp_path / "out", EvalSettings(benchmark="sources", images_per_prompt=2, seed=0)
    )
    return recorder


def test_condition_images_reach_the_rollout(tmp_path: Path) -> None:
    records = [PromptRecord(f"edit {v}", images=(_png(tmp_path / f"{v}.png", v),)) for v in (10, 200)]
    (conditions,) = _run(tmp_path, records).conditions
    assert len(conditions) == 4  # two images per prompt, each with its prompt's source
    values = [int(c[0][0, 0, 0]) for c in conditions]
    assert values == [10, 10, 200, 200]
    assert all(c[0].shape == (6, 5, 3) and c[0].dtype == np.uint8 for c in conditions)


def test_a_text_only_benchmark_sends_no_conditions(tmp_path: Path) -> None:
    assert _run(tmp_path, [PromptRecord("a cat"), PromptRecord("a dog")]).conditions == [[]]
    assert records_conditions([PromptRecord("a cat")]) == []
