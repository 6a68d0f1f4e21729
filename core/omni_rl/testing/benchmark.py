"""Conformance suite for benchmarks (:class:`omni_rl.benchmark.Benchmark`, hook ``omni_rl_benchmarks``)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from omni_rl.benchmark import BenchmarkSummary, ImageResult, ImageVerdict
from omni_rl.data import PromptRecord
from omni_rl.evaluation.loop import select_prompts
from omni_rl.protocols import Benchmark
from omni_rl.specs import BenchmarkSpec
from omni_rl.testing._base import SpecConformance


class BenchmarkConformance(SpecConformance):
    """Subclass with a ``spec`` fixture (see :class:`SpecConformance` for ``options`` and ``component``).

    Optional fixtures: ``images`` (uint8, (N, H, W, 3); default 4 random 64×64 images) and ``records`` (one prompt
    per image; default N prompts spread over the set, as ``--limit N`` picks them). Checks: the prompt set is
    non-empty, ordered and stable; one verdict per image, finite, the same for the same images, a batch of one
    works; ``summarize`` counts the images and prompts it is given and returns a finite headline number; the
    optional members, when present, give distinct deterministic seeds and ``key=value`` overrides.
    """

    spec_class: ClassVar[type[BenchmarkSpec]] = BenchmarkSpec

    @pytest.fixture
    def images(self) -> np.ndarray:
        return np.random.default_rng(0).integers(0, 256, size=(4, 64, 64, 3), dtype=np.uint8)

    @pytest.fixture
    def records(self, component: Benchmark, images: np.ndarray) -> list[tuple[int, PromptRecord]]:
        picked = select_prompts(component.prompts(), len(images))
        return [picked[i % len(picked)] for i in range(len(images))]

    def test_is_a_benchmark(self, component: Any) -> None:
        assert isinstance(component, Benchmark)
        assert isinstance(component.images_per_prompt, int) and component.images_per_prompt >= 1

    def test_prompt_set_is_non_empty_and_stable(self, component: Benchmark) -> None:
        prompts = component.prompts()
        assert prompts and all(isinstance(r, PromptRecord) and r.prompt.strip() for r in prompts)
        assert component.prompts() == prompts, "prompts() must return the same set, in the same order, every call"

    def test_one_finite_verdict_per_image(
        self, component: Benchmark, images: np.ndarray, records: list[tuple[int, PromptRecord]]
    ) -> None:
        verdicts = component.score(images, [r for _, r in records])
        assert len(verdicts) == len(images)
        for verdict in verdicts:
            assert isinstance(verdict, ImageVerdict) and isinstance(verdict.correct, bool)
            assert math.isfinite(verdict.score) and isinstance(verdict.reason, str)
            assert all(math.isfinite(float(v)) for v in verdict.details.values())

    def test_same_images_same_verdicts(
        self, component: Benchmark, images: np.ndarray, records: list[tuple[int, PromptRecord]]
    ) -> None:
        prompts = [r for _, r in records]
        assert component.score(images, prompts) == component.score(images, prompts)

    def test_a_batch_of_one(
        self, component: Benchmark, images: np.ndarray, records: list[tuple[int, PromptRecord]]
    ) -> None:
        assert len(component.score(images[:1], [records[0][1]])) == 1

    def test_summarize_counts_what_it_is_given(
        self, component: Benchmark, images: np.ndarray, records: list[tuple[int, PromptRecord]]
    ) -> None:
        verdicts = component.score(images, [r for _, r in records])
        results = [
            ImageResult(
                index=index,
                sample=k,
                prompt=record.prompt,
                metadata=dict(record.metadata),
                correct=verdict.correct,
                score=verdict.score,
                reason=verdict.reason,
                image=f"images/{index:05d}/samples/{k:04d}.png",
                seed=k,
                details=dict(verdict.details),
            )
            for k, ((index, record), verdict) in enumerate(zip(records, verdicts, strict=True))
        ]
        summary = component.summarize(results)
        assert isinstance(summary, BenchmarkSummary) and summary.text.strip()
        assert summary.images == len(results) and summary.prompts == len({r.index for r in results})
        assert math.isfinite(summary.overall)
        assert 0.0 <= summary.correct_images <= 1.0 and 0.0 <= summary.correct_prompts <= 1.0
        assert all(0 <= row.correct <= row.total <= len(results) for row in summary.rows)

    def test_optional_image_seed_gives_distinct_deterministic_seeds(self, component: Benchmark) -> None:
        seed_of = getattr(component, "image_seed", None)
        if seed_of is None:
            pytest.skip("no image_seed: the core's seeds are used")
        pairs = [(i, k) for i in range(len(component.prompts())) for k in range(component.images_per_prompt)]
        seeds = [seed_of(0, i, k) for i, k in pairs]
        assert all(isinstance(s, int) for s in seeds) and len(set(seeds)) == len(seeds)
        assert seeds == [seed_of(0, i, k) for i, k in pairs]

    def test_optional_pipeline_overrides_are_key_value_strings(self, component: Benchmark, tmp_path: Path) -> None:
        overrides = getattr(component, "pipeline_overrides", None)
        if overrides is None:
            pytest.skip("no pipeline_overrides: a pipeline is sampled with the core's defaults")
        (tmp_path / "model_index.json").write_text('{"_class_name": "StableDiffusion3Pipeline"}')
        given = overrides(tmp_path)
        assert isinstance(given, list) and all(isinstance(o, str) and "=" in o for o in given)
