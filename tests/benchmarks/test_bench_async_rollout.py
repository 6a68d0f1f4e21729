"""benchmarks/async_rollout.py's arithmetic: the overlap verdict against max(rollout, update) of the synchronous run,
and the val reward read after the same wall-clock of training (issue 19)."""

from __future__ import annotations

import importlib
import math
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).parents[2]


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))  # as `python benchmarks/async_rollout.py` has it
    return importlib.import_module("async_rollout")


def _row(step: int, step_s: float, rollout_s: float = 0.0, reward_s: float = 0.0, train_s: float = 0.0) -> dict:
    return {
        "step": step,
        "perf/step_s": step_s,
        "perf/rollout_s": rollout_s,
        "perf/reward_s": reward_s,
        "perf/train_s": train_s,
    }


def test_the_verdict_divides_by_the_larger_of_rollout_and_update(bench: ModuleType) -> None:
    # step 1 (start-up) is left out of every median
    sync = [_row(1, 99, 50, 1, 40), _row(2, 7, 4, 0.5, 2.5), _row(3, 7, 4, 0.5, 2.5)]
    fast = [_row(1, 99), _row(2, 4.2), _row(3, 4.2)]
    slow = [_row(1, 99), _row(2, 4.8), _row(3, 4.8)]
    assert "= **1.05x** (meets the 1.1x target)" in bench.overlap_verdict(sync, fast)
    assert "= **1.20x** (misses the 1.1x target)" in bench.overlap_verdict(sync, slow)
    update_bound = [_row(1, 9), _row(2, 9, 1, 1, 5)]  # update 6 s > rollout 1 s
    assert "= **0.70x**" in bench.overlap_verdict(update_bound, [_row(1, 9), _row(2, 4.2)])


def test_val_after_the_same_wall_clock_is_the_last_evaluation_inside_it(bench: ModuleType) -> None:
    rows = [{"step": 0, "val/reward/mean": 0.3}]
    for step in range(1, 7):
        row = _row(step, 10.0)
        if step % 2 == 0:
            row["val/reward/mean"] = 0.3 + 0.05 * step
        rows.append(row)
    assert bench.val_at_clock(rows, 45.0) == (4, pytest.approx(0.5))
    assert bench.val_at_clock(rows, 40.0) == (4, pytest.approx(0.5))  # an evaluation exactly at the budget counts
    assert bench.val_at_clock(rows, 5.0) == (0, pytest.approx(0.3))  # only the base inside the budget
    step, value = bench.val_at_clock(rows[1:], 5.0)
    assert step == 0 and math.isnan(value)


def test_gpu_cases_split_the_gpus_between_policy_and_rollout_workers(bench: ModuleType) -> None:
    colocated, staleness_0, staleness_1 = bench.gpu_cases(1).values()
    assert colocated == ("cluster.gpus_per_worker=1",)
    assert "cluster.rollout_gpus_per_worker=0.5" in staleness_0
    assert staleness_1 == (*staleness_0, "run.max_staleness=1")
    eight = bench.gpu_cases(8)
    assert list(eight) == [
        "colocated, 8 workers",
        "disaggregated 4+4, staleness 0",
        "disaggregated 4+4, staleness 1",
    ]
    assert "cluster.rollout_workers=4" in eight["disaggregated 4+4, staleness 1"]
    assert list(bench.gpu_cases(3))[1] == "disaggregated 2+1, staleness 0"
