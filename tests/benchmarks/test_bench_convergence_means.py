"""benchmarks/convergence.py --only keeps the other algorithms' rows, and their place in the comparison table with
them (issues 22 and 32), and the notes written by hand below the table (issue 32)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


def _result(base: float, best: float, final: float, s_01: float | None = None) -> dict[str, object]:
    return {
        "base": base,
        "best": best,
        "best_step": 3,
        "final": final,
        "steps": 10,
        "step_0.1": None,
        "s_0.1": s_01,
        "step_0.2": None,
        "s_0.2": None,
        "train_s": 1.0,
        "wall_s": 2.0,
        "images_per_s": 4.0,
    }


def test_a_rerun_of_one_algorithm_keeps_the_others_in_the_comparison(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))  # as `python benchmarks/convergence.py` has it
    bench = importlib.import_module("convergence")
    first, second = list(bench.CONFIGS)[:2]
    report = tmp_path / "benchmarks.md"
    report.write_text("# Benchmarks\n")
    bench.write_report(report, {(first, 1): _result(0.1, 0.5, 0.3, 20.0), (first, 2): _result(0.1, 0.3, 0.1)})
    bench.write_report(report, {(second, 1): _result(0.0, 0.2, 0.2), (second, 2): _result(0.0, 0.4, 0.2)})  # --only
    text = report.read_text()
    # mean ± sample sd over the seeds; seconds to a gain over the seeds that reached it, and how many did
    row = (
        f"| {first} | 1, 2 | 10 | 0.100 ± 0.000 | +0.300 ± 0.141 | +0.100 ± 0.141 | 20 (1/2) | — (0/2) | 4.00 ± 0.00 |"
    )
    assert row in text
    assert f"| {second} | 1, 2 | 10 | 0.000 ± 0.000 | +0.300 ± 0.141 | +0.200 ± 0.000 | — (0/2) |" in text
    assert text.index("| algorithm | seeds |") < text.index("| algorithm | config |")  # the comparison first
    assert text.count(f"| {first} | `") == 2 and "mean over" not in text


def test_a_rerun_keeps_the_notes_below_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    bench = importlib.import_module("convergence")
    first = next(iter(bench.CONFIGS))
    report = tmp_path / "benchmarks.md"
    report.write_text("# Benchmarks\n")
    bench.write_report(report, {(first, 1): _result(0.1, 0.5, 0.3), (first, 2): _result(0.1, 0.3, 0.1)})
    notes = "- **What mattered**: the learning rate.\n\n| a table | of notes |\n|---|---|\n\nA closing paragraph."
    report.write_text(report.read_text().rstrip("\n") + "\n\n" + notes + "\n\n## Later\n\nafter\n")
    bench.write_report(report, {(first, 1): _result(0.0, 0.2, 0.2)})
    text = report.read_text()
    assert text.count(notes) == 1 and text.index(f"| {first} | `") < text.index(notes) < text.index("## Later")
    assert text.endswith("## Later\n\nafter\n")
