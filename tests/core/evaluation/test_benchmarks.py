"""The benchmark hook and ``omni-rl eval``'s loop with a fake benchmark and a fake generator (no model):
prompt subsets, seeds, resume after a stop, refusal to mix settings, and the report files."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest

from omni_rl import BenchmarkSpec, ConfigError, hookimpl
from omni_rl.batch import RolloutBatch
from omni_rl.benchmark import Benchmark, BenchmarkSummary, ImageResult, ImageVerdict, SummaryRow
from omni_rl.data import PromptRecord
from omni_rl.evaluation.generator import Generator
from omni_rl.evaluation.loop import EvalSettings, image_seed, run_eval, select_prompts
from omni_rl.testing import InlinePlugin, make_registry


class EvenSeeds:
    """Correct when the image's first pixel (its seed, drawn by FakeRollout) is even."""

    images_per_prompt = 2

    def __init__(self, n: int = 10) -> None:
        self.records = [PromptRecord(f"prompt {i}", {"group": "ab"[i % 2]}) for i in range(n)]
        self.scored = 0

    def prompts(self) -> list[PromptRecord]:
        return self.records

    def score(self, images: np.ndarray, records: Sequence[PromptRecord]) -> list[ImageVerdict]:
        self.scored += len(images)
        return [ImageVerdict(correct=int(a[0, 0, 0]) % 2 == 0, score=0.5, reason="odd") for a in images]

    def summarize(self, results: Sequence[ImageResult]) -> BenchmarkSummary:
        rows = []
        for group in "ab":
            mine = [r for r in results if r.metadata["group"] == group]
            correct = sum(r.correct for r in mine)
            rows.append(SummaryRow(name=group, correct=correct, total=len(mine), score=correct / len(mine)))
        overall = sum(r.score for r in rows) / 2
        return BenchmarkSummary(
            benchmark="even",
            rows=tuple(rows),
            overall=overall,
            images=len(results),
            prompts=len({r.index for r in results}),
            correct_images=0.0,
            correct_prompts=0.0,
            text=f"overall {overall}",
        )


@attrs.define
class FakeRollout:
    calls: int = 0
    fail_after: int | None = None

    def generate(self, model: Any, sampler: Any, request: Any) -> RolloutBatch:
        import torch

        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            raise KeyboardInterrupt
        assert request.mode == "eval" and not request.record_trajectory
        images = torch.stack([torch.full((4, 4, 3), seed % 256, dtype=torch.uint8) for seed in request.seeds])
        n = len(request.prompts)
        return RolloutBatch(
            prompts=request.prompts,
            group_ids=torch.tensor(request.group_ids),
            seeds=torch.tensor(request.seeds),
            images=images,
            final_latents=torch.zeros(n, 1, 1, 1),
            conditioning=None,  # type: ignore[arg-type]
        )


def generator(rollout: FakeRollout, step: int = 5) -> Generator:
    return Generator(model=None, sampler=None, rollout=rollout, info={"target": "/run", "kind": "run", "step": step})


def test_omni_rl_benchmarks() -> None:
    class Plugin:
        @hookimpl
        def omni_rl_benchmarks(self) -> list[BenchmarkSpec]:
            return [BenchmarkSpec(name="even", factory=lambda config, ctx: EvenSeeds())]

    registry = make_registry(InlinePlugin(Plugin(), "bench-test", "1.0"))
    (component,) = registry.components
    assert component.kind == "benchmark"
    benchmark = registry.get("benchmark", "even").factory(None, None)
    assert isinstance(benchmark, Benchmark)


def test_select_prompts_spreads_a_limit_over_the_set() -> None:
    records = [PromptRecord(str(i)) for i in range(12)]
    assert [i for i, _ in select_prompts(records, 4)] == [0, 3, 6, 9]
    assert len(select_prompts(records, None)) == 12 == len(select_prompts(records, 50))
    with pytest.raises(ConfigError, match="--limit"):
        select_prompts(records, 0)
    # the first images of a prompt keep their seeds when more images per prompt are asked for
    assert image_seed(0, 3, 0) == 3 and image_seed(7, 3, 1) == 7 + 3 + 100_003


def test_run_eval_writes_the_report_and_resumes(tmp_path: Path) -> None:
    benchmark, settings = EvenSeeds(), EvalSettings(benchmark="even", images_per_prompt=2, seed=0)
    stopped = FakeRollout(fail_after=1)  # 8 prompts a call (16 images): the second call is interrupted
    with pytest.raises(KeyboardInterrupt):
        run_eval(benchmark, generator(stopped), tmp_path, settings)
    assert len((tmp_path / "results.jsonl").read_text().splitlines()) == 16

    benchmark = EvenSeeds()
    summary = run_eval(benchmark, generator(FakeRollout()), tmp_path, settings)
    assert benchmark.scored == 4  # only the two prompts left: 2 x 2 images
    results = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert len(results) == 20 and {(r["index"], r["sample"]) for r in results} == {
        (i, s) for i in range(10) for s in (0, 1)
    }
    # image s of prompt i has seed i + 100003 s: even for even i when s = 0, and odd for even i when s = 1
    assert {r["seed"] for r in results if r["index"] == 2} == {2, 100_005}
    assert summary.rows[0] == SummaryRow(name="a", correct=5, total=10, score=0.5)
    assert (tmp_path / "images" / "00002" / "samples" / "0001.png").is_file()
    assert json.loads((tmp_path / "images" / "00002" / "metadata.jsonl").read_text()) == {
        "group": "a",
        "prompt": "prompt 2",
    }
    table = list(csv.reader((tmp_path / "summary.csv").open()))
    assert table[0] == ["group", "correct", "total", "score"] and table[-1][0] == "overall"
    assert json.loads((tmp_path / "summary.json").read_text())["overall"] == summary.overall
    assert (tmp_path / "summary.txt").read_text().startswith("overall") and (tmp_path / "failures.png").is_file()


def test_resuming_with_other_settings_is_refused(tmp_path: Path) -> None:
    settings = EvalSettings(benchmark="even", images_per_prompt=1, seed=0, limit=2)
    run_eval(EvenSeeds(), generator(FakeRollout()), tmp_path, settings)
    with pytest.raises(ConfigError, match=r"seed: 0 -> 1"):
        run_eval(EvenSeeds(), generator(FakeRollout()), tmp_path, attrs.evolve(settings, seed=1))
    with pytest.raises(ConfigError, match=r"step: 5 -> 6"):
        run_eval(EvenSeeds(), generator(FakeRollout(), step=6), tmp_path, settings)


def test_a_benchmarks_own_seeds_and_details_are_used(tmp_path: Path) -> None:
    """Optional members: ``image_seed`` replaces the core's seeds; a verdict's ``details`` reach results.jsonl."""

    class OwnSeeds(EvenSeeds):
        def image_seed(self, seed: int, index: int, sample: int) -> int:
            return 1000 + seed + 10 * index + sample

        def score(self, images: np.ndarray, records: Sequence[PromptRecord]) -> list[ImageVerdict]:
            return [
                attrs.evolve(v, details={"pixel": float(a[0, 0, 0])})
                for v, a in zip(super().score(images, records), images, strict=True)
            ]

    settings = EvalSettings(benchmark="even", images_per_prompt=2, seed=0, limit=2)
    run_eval(OwnSeeds(), generator(FakeRollout()), tmp_path, settings)
    results = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert sorted(r["seed"] for r in results) == [1000, 1001, 1050, 1051]  # prompts 0 and 5 of 10
    assert all(r["details"] == {"pixel": float(r["seed"] % 256)} for r in results)


def test_compare_summaries_keeps_rows_one_side_lacks() -> None:
    from omni_rl.evaluation.compare import compare_summaries, comparison_text

    def summary(rows: dict[str, float], overall: float) -> BenchmarkSummary:
        table = tuple(SummaryRow(name=k, correct=1, total=2, score=v) for k, v in rows.items())
        return BenchmarkSummary(
            benchmark="even",
            rows=table,
            overall=overall,
            images=2,
            prompts=1,
            correct_images=0.5,
            correct_prompts=0.0,
            text="",
        )

    rows = compare_summaries(summary({"a": 0.25, "b": 0.5}, 0.375), summary({"b": 0.75, "c": 1.0}, 0.875))
    assert [(r.name, r.a, r.b, r.difference) for r in rows] == [
        ("a", 0.25, None, None),
        ("b", 0.5, 0.75, 0.25),
        ("c", None, 1.0, None),
        ("% correct images", 0.5, 0.5, 0.0),
        ("% correct prompts", 0.0, 0.0, 0.0),
        ("overall", 0.375, 0.875, 0.5),
    ]
    text = comparison_text("even", ("step 1", "step 9"), rows)
    assert text.splitlines()[0] == "even: step 1 vs step 9 (difference = step 9 - step 1)"
    assert text.splitlines()[-1].split() == ["overall", "0.3750", "0.8750", "+0.5000"]
