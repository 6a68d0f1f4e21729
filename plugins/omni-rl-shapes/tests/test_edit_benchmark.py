"""The ``shapes_edit`` benchmark: the core's conformance suite, and ``run_eval`` end to end with fake editors that
read the source from the request's conditions (an oracle that draws the target, and one that returns the source)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
from omni_rl_shapes.edit.benchmark import ShapesEditBenchmark
from omni_rl_shapes.edit.config import ShapesEditBenchmarkConfig
from omni_rl_shapes.edit.tasks import EDIT_KINDS, placed_from
from omni_rl_shapes.hooks import omni_rl_benchmarks
from omni_rl_shapes.render import draw

from omni_rl.batch import RolloutBatch
from omni_rl.evaluation.generator import Generator
from omni_rl.evaluation.loop import EvalSettings, run_eval
from omni_rl.specs import BenchmarkSpec
from omni_rl.testing.benchmark import BenchmarkConformance


class TestShapesEditBenchmark(BenchmarkConformance):
    @pytest.fixture
    def spec(self) -> BenchmarkSpec:
        (spec,) = [s for s in omni_rl_benchmarks() if s.name == "shapes_edit"]
        return spec


@attrs.define
class FakeEditor:
    """Edits perfectly (``oracle``) or not at all, and checks that each sample's source came with the request."""

    oracle: bool
    seen: int = 0

    def generate(self, model: Any, sampler: Any, request: Any) -> RolloutBatch:
        import torch

        assert len(request.conditions) == len(request.prompts)
        images = []
        for meta, (source,) in zip(request.metadata, request.conditions, strict=True):
            size = meta["size"]
            np.testing.assert_array_equal(source, draw([placed_from(o) for o in meta["source_objects"]], size))
            images.append(draw([placed_from(o) for o in meta["target_objects"]], size) if self.oracle else source)
            self.seen += 1
        n = len(images)
        return RolloutBatch(
            prompts=request.prompts,
            group_ids=torch.tensor(request.group_ids),
            seeds=torch.tensor(request.seeds),
            images=torch.from_numpy(np.stack(images)),
            final_latents=torch.zeros(n, 1, 1, 1),
            conditioning=None,  # type: ignore[arg-type]
        )


def _run(tmp_path: Path, oracle: bool, split: str = "val") -> Any:
    benchmark = ShapesEditBenchmark(ShapesEditBenchmarkConfig(split=split))
    editor = FakeEditor(oracle)
    generator = Generator(model=None, sampler=None, rollout=editor, info={"target": "/x", "kind": "pipeline"})
    settings = EvalSettings(benchmark="shapes_edit", images_per_prompt=1, seed=0)
    summary = run_eval(benchmark, generator, tmp_path, settings)
    assert editor.seen == 48
    return summary


def test_a_perfect_editor_scores_one(tmp_path: Path) -> None:
    summary = _run(tmp_path, oracle=True)
    assert summary.overall == 1.0 and summary.correct_images == 1.0 and summary.images == 48
    rows = {row.name: row for row in summary.rows}
    assert all(rows[k].score == 1.0 and rows[k].total == 8 for k in EDIT_KINDS)
    assert "Edit reward (mean score): 1.00000" in summary.text


def test_an_editor_that_changes_nothing_passes_only_the_control(tmp_path: Path) -> None:
    summary = _run(tmp_path, oracle=False, split="test")
    rows = {row.name: row for row in summary.rows}
    assert rows["noop"].score == 1.0
    assert all(rows[k].score == 0.0 for k in EDIT_KINDS if k != "noop")
    assert summary.overall == pytest.approx(1 / 6)
    # everything is preserved, but an unremoved object is one too many: preserve 1/2 on the 8 remove tasks
    assert rows["preserve"].score == pytest.approx(1 - 0.5 * 8 / 48) and rows["edit"].score == pytest.approx(1 / 6)


def test_the_split_option_is_checked() -> None:
    """``omni-rl eval --benchmark shapes_edit --set benchmark.split=test``; the training split is refused."""
    from omni_rl.config import structure_options
    from omni_rl.errors import ConfigError

    (spec,) = [s for s in omni_rl_benchmarks() if s.name == "shapes_edit"]
    options = structure_options(spec, {"split": "test", "position_tolerance": 0.05}, "$.benchmark.options")
    benchmark = spec.factory(options, None)
    assert benchmark.split == "test" and benchmark.reward.config.position_tolerance == 0.05
    assert benchmark.prompts()[0].images[0].path.parent.name == "test"
    with pytest.raises((ConfigError, ValueError), match="split"):
        structure_options(spec, {"split": "train"}, "$.benchmark.options")
