"""benchmarks/flash_vs_euler.py scores the SD3 shapes example's own validation: the same prompts, in the same
order, with the same per-image seeds as the trainer's validation at step 0 (so its 10-step Euler row is that
example's base val reward)."""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import pytest

from omni_rl.protocols import RolloutOutcome, RolloutRequest

ROOT = Path(__file__).parents[2]


class CapturingGroup:
    """Stands in for the worker group: keeps the request, returns blank images."""

    request: RolloutRequest

    def rollout(self, request: RolloutRequest) -> RolloutOutcome:
        self.request = request
        images = np.zeros((len(request.prompts), 8, 8, 3), dtype=np.uint8)
        return RolloutOutcome(images=images, prompts=request.prompts, group_ids=np.asarray(request.group_ids))


def test_the_benchmark_samples_the_trainers_validation_set(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pytest.importorskip("omni_rl_shapes")
    pytest.importorskip("omni_rl_sd3")
    from omni_rl import load_config
    from omni_rl.train.trainer import Trainer

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))  # as `python benchmarks/flash_vs_euler.py` has it
    bench = importlib.import_module("flash_vs_euler")
    config = load_config(ROOT / "docs" / "examples" / "shapes_sd3.toml", [f"run.output_dir={tmp_path}"])
    group = CapturingGroup()
    Trainer(config).validate(group, 0, tmp_path)  # type: ignore[arg-type]
    records, seeds = bench.validation_set(config)
    assert len(seeds) == 48 * 3
    assert seeds == group.request.seeds
    assert [r.prompt for r in records] == group.request.prompts
