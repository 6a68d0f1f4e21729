"""The speed-options benchmark (`nox -s bench_speed_options`) on the CPU: every option it measures runs through
the framework with the old log-probs recomputed, the first update's ratio is 1, the baseline runs first and last,
an option that fails gets a row with its error, and without CUDA the GPU run says so and writes nothing."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import pytest
import torch

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


def _load(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # as `python benchmarks/speed_options.py` has it
    return importlib.import_module("speed_options")


def test_cpu_rows(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    bench = _load(monkeypatch)
    out = tmp_path / "benchmarks.md"
    results = bench.main(["--device", "cpu", "--only", "auto", "--repeats", "1", "--out", str(out)])
    assert [r.variant.key for r in results] == ["off", "auto", "off"]
    for r in results:
        assert not r.error, r.error
        # recomputed through the same forward on the CPU: equal up to the float rounding of the batch shapes (the
        # rollout's chunk and the update's micro-batch differ, and some CPUs' kernels round them apart by an ulp)
        assert r.ratio_mean == 1.0 and r.abs_delta_max <= 1e-6
        assert r.rollout_s > 0 and r.update_s > 0 and r.first_rollout_s > 0
    assert not out.exists()  # the CPU check prints; only the GPU run writes the table


def test_cuda_only_options_are_left_out_on_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    bench = _load(monkeypatch)
    args = bench.parse_args(["--device", "cpu", "--only", "cuda_graphs", "flash", "math"])
    assert [v.key for v in bench.chosen(args)] == ["off", "math", "off"]
    gpu = bench.parse_args(["--device", "cuda"])
    assert [v.key for v in bench.chosen(gpu)] == [v.key for v in bench.VARIANTS] + ["off"]


def test_a_failing_option_gets_a_row_with_its_error(monkeypatch: pytest.MonkeyPatch) -> None:
    bench = _load(monkeypatch)
    off = bench.Result(
        bench.BY_KEY["off"],
        rollout_s=2.0,
        update_s=1.0,
        first_rollout_s=2.5,
        ratio_mean=1.0,
        abs_delta_max=0.0,
        images=16,
    )
    fast = bench.Result(
        bench.BY_KEY["cuda_graphs"],
        rollout_s=1.0,
        update_s=1.0,
        first_rollout_s=9.0,
        ratio_mean=1.0,
        abs_delta_max=3e-6,
        peak_gib=30.5,
        images=16,
    )
    broken = bench.Result(bench.BY_KEY["cudnn"], error="RuntimeError: No available kernel")
    table = "\n".join(bench.rows([off, fast, broken, off]))
    assert "| 1.000 (0.50×) | 16.00 | 1.000 (1.00×) | 9.0 | 1.000000 | 3e-06 | 30.5 |" in table
    assert "failed: RuntimeError: No available kernel" in table
    text = bench.section([off, fast], ["Measured on a test."])
    assert text.startswith(bench.SECTION) and "Measured on a test." in text


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown without CUDA")
def test_gpu_run_without_cuda_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys) -> None:
    bench = _load(monkeypatch)
    out = tmp_path / "benchmarks.md"
    assert bench.main(["--device", "cuda", "--out", str(out)]) == []
    assert "no CUDA device" in capsys.readouterr().out and not out.exists()
