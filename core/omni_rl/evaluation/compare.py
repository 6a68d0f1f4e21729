"""``omni-rl eval RUN_DIR --compare A B``: two checkpoints' benchmark reports side by side, with the difference.

What a user asks of an evaluation during RL is "did training help, and where": the table puts each group of the
benchmark (GenEval's tags, the shapes sub-scores), the correct-image and correct-prompt fractions and the overall
score of step A beside step B's, with B − A. Rows one report lacks (a ``--limit`` subset without a tag) are
shown empty rather than dropped, so the two columns always read the same rows.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import attrs

from omni_rl.benchmark import BenchmarkSummary

COMPARISON_FILES = ("comparison.txt", "comparison.json", "comparison.csv")


@attrs.frozen(kw_only=True)
class ComparedRow:
    """One line of the comparison: a group (or ``% correct images``, ``% correct prompts``, ``overall``)."""

    name: str
    a: float | None
    b: float | None

    @property
    def difference(self) -> float | None:
        return None if self.a is None or self.b is None else self.b - self.a


def compare_summaries(a: BenchmarkSummary, b: BenchmarkSummary) -> list[ComparedRow]:
    """The rows of ``a`` in its order, then those only ``b`` has, then the three totals."""
    first = {row.name: row.score for row in a.rows}
    second = {row.name: row.score for row in b.rows}
    names = [*first, *(name for name in second if name not in first)]
    rows = [ComparedRow(name=name, a=first.get(name), b=second.get(name)) for name in names]
    return [
        *rows,
        ComparedRow(name="% correct images", a=a.correct_images, b=b.correct_images),
        ComparedRow(name="% correct prompts", a=a.correct_prompts, b=b.correct_prompts),
        ComparedRow(name="overall", a=a.overall, b=b.overall),
    ]


def comparison_text(benchmark: str, labels: tuple[str, str], rows: list[ComparedRow]) -> str:
    """The console table: one line per row, the two scores and their signed difference."""
    width = max(len("group"), *(len(row.name) for row in rows)) + 2
    columns = max(10, *(len(label) + 2 for label in labels))

    def cell(value: float | None, signed: bool = False) -> str:
        text = "-" if value is None else (f"{value:+.4f}" if signed else f"{value:.4f}")
        return text.rjust(columns)

    lines = [
        f"{benchmark}: {labels[0]} vs {labels[1]} (difference = {labels[1]} - {labels[0]})",
        "group".ljust(width) + labels[0].rjust(columns) + labels[1].rjust(columns) + "difference".rjust(columns),
    ]
    for row in rows:
        lines.append(row.name.ljust(width) + cell(row.a) + cell(row.b) + cell(row.difference, signed=True))
    return "\n".join(lines)


def write_comparison(
    out: Path, benchmark: str, labels: tuple[str, str], a: BenchmarkSummary, b: BenchmarkSummary
) -> str:
    """Write ``comparison.txt``, ``comparison.json`` and ``comparison.csv`` to ``out``; returns the text."""
    rows = compare_summaries(a, b)
    text = comparison_text(benchmark, labels, rows)
    out.mkdir(parents=True, exist_ok=True)
    (out / "comparison.txt").write_text(text + "\n", encoding="utf-8")
    record = {
        "benchmark": benchmark,
        "labels": list(labels),
        "rows": [{"name": r.name, "a": r.a, "b": r.b, "difference": r.difference} for r in rows],
        "summaries": [attrs.asdict(a), attrs.asdict(b)],
    }
    (out / "comparison.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    with (out / "comparison.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["group", labels[0], labels[1], "difference"])
        for r in rows:
            writer.writerow([r.name, *("" if v is None else f"{v:.6f}" for v in (r.a, r.b, r.difference))])
    return text
