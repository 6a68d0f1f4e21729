"""benchmarks/ratio_per_timestep.py on synthetic run directories: which metrics it reads (the per-step ratio means,
grpo_guard's raw ones, nothing else), the whole-run and last-quarter means by hand, the labels, and its outputs."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # as `python benchmarks/ratio_per_timestep.py` has it
    return importlib.import_module("ratio_per_timestep")


def _run(path: Path, loss: str | None, rows: list[dict]) -> Path:
    path.mkdir()
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if loss is not None:
        (path / "config.resolved.toml").write_text(f'[run]\nsteps = 8\n\n[loss]\nname = "{loss}"\noptions = {{}}\n')
    return path


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    # flow_grpo: 8 training steps, step 0 at 1 - 1e-6 * k, step 1 at 1 + 1e-6 * k (k = step); an eval-only row
    # at step 0, a row out of order, and a NaN that must be skipped
    flow = [{"step": 0, "val/reward/mean": 0.3}]
    for k in (2, 1, 3, 4, 5, 6, 7, 8):
        flow.append(
            {
                "step": k,
                "actor/ratio_mean": 1.0,
                "actor/ratio_mean/step_0": 1 - 1e-6 * k,
                "actor/ratio_mean/step_1": float("nan") if k == 8 else 1 + 1e-6 * k,
                "actor/ratio_mean_rawish/step_0": 5.0,  # not a series this script reads
            }
        )
    # grpo_guard: 4 steps, its normalised ratio only at step 1, the raw one at steps 1 and 2
    guard = [
        {"step": k, "actor/ratio_mean/step_1": 1 + 2e-6, "actor/ratio_mean_raw/step_1": 1 - 4e-6 * k}
        | ({"actor/ratio_mean_raw/step_2": 1 - 1e-6} if k > 2 else {})
        for k in (1, 2, 3, 4)
    ]
    return _run(tmp_path / "a", "flow_grpo", flow), _run(tmp_path / "b", None, guard)


def test_series_and_means_by_hand(bench: ModuleType, runs: tuple[Path, Path]) -> None:
    flow, guard = runs
    (f,) = bench.load_series(flow)
    assert f.label == "flow_grpo"  # from config.resolved.toml's [loss] name
    assert f.values[0] == pytest.approx([1 - 1e-6 * k for k in range(1, 9)])  # in step order
    assert f.values[1] == pytest.approx([1 + 1e-6 * k for k in range(1, 8)])  # the NaN skipped
    assert f.mean(0) == pytest.approx(1 - 4.5e-6, abs=1e-12)
    assert f.last_quarter(0) == pytest.approx(1 - 7.5e-6, abs=1e-12)  # steps 7, 8 of 8
    assert f.last_quarter(1) == pytest.approx(1 + 6.5e-6, abs=1e-12)  # ceil(7 / 4) = 2: steps 6, 7
    norm, raw = bench.load_series(guard, "guard")
    assert (norm.label, raw.label) == ("guard", "guard (raw)")
    assert set(norm.values) == {1} and set(raw.values) == {1, 2}
    assert raw.mean(1) == pytest.approx(1 - 10e-6, abs=1e-12)
    assert raw.last_quarter(1) == pytest.approx(1 - 16e-6, abs=1e-12)  # ceil(4 / 4) = 1: step 4
    assert raw.last_quarter(2) == pytest.approx(1 - 1e-6, abs=1e-12)


def test_table_and_plot(bench: ModuleType, runs: tuple[Path, Path], tmp_path: Path) -> None:
    flow, guard = runs
    out, png = tmp_path / "ratio.md", tmp_path / "ratio.png"
    assert bench.main([str(flow), f"{guard}=grpo_guard", "--out", str(out), "--png", str(png)]) == 0
    lines = out.read_text().splitlines()
    assert lines[0] == (
        "| run | step 0: all | step 0: last 1/4 | step 1: all | step 1: last 1/4 | step 2: all | step 2: last 1/4 |"
    )
    assert lines[2] == "| flow_grpo | -4.50e-06 | -7.50e-06 | +4.00e-06 | +6.50e-06 |  |  |"
    assert lines[3] == "| grpo_guard |  |  | +2.00e-06 | +2.00e-06 |  |  |"
    assert lines[4] == "| grpo_guard (raw) |  |  | -1.00e-05 | -1.60e-05 | -1.00e-06 | -1.00e-06 |"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_run_without_per_step_metrics_is_named(bench: ModuleType, tmp_path: Path) -> None:
    empty = _run(tmp_path / "dpo", "dpo", [{"step": 1, "actor/loss": 0.5}])
    with pytest.raises(SystemExit, match=r"no actor/ratio_mean/step_<j> metrics"):
        bench.load_series(empty)
    with pytest.raises(SystemExit):
        bench.main([str(empty)])  # one run: nothing to compare
