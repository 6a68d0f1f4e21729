"""benchmarks/convergence.py --only keeps the other algorithms' rows, and their seed means with them (issue 22), and
the notes written by hand below the table (issue 32)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


def _result(base: float, best: float, final: float) -> dict[str, object]:
    return {
        "base": base,
        "best": best,
        "best_step": 3,
        "final": final,
        "steps": 10,
        "step_0.1": None,
        "s_0.1": None,
        "step_0.2": None,
        "s_0.2": None,
        "train_s": 1.0,
        "wall_s": 2.0,
    }


def test_a_rerun_of_one_algorithm_keeps_the_others_seed_means(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))  # as `python benchmarks/convergence.py` has it
    bench = importlib.import_module("convergence")
    first, second = list(bench.CONFIGS)[:2]
    report = tmp_path / "benchmarks.md"
    report.write_text("# Benchmarks\n")
    bench.write_report(report, {(first, 1): _result(0.1, 0.5, 0.3), (first, 2): _result(0.1, 0.3, 0.1)})
    bench.write_report(report, {(second, 1): _result(0.0, 0.2, 0.2), (second, 2): _result(0.0, 0.4, 0.2)})  # --only
    text = report.read_text()
    assert f"- {first}, mean over 2 seeds: best − base +0.300, final − base +0.100" in text
    assert f"- {second}, mean over 2 seeds: best − base +0.300, final − base +0.200" in text


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
    assert text.count(notes) == 1 and text.index("mean over 2 seeds") < text.index(notes) < text.index("## Later")
    assert text.endswith("## Later\n\nafter\n")
