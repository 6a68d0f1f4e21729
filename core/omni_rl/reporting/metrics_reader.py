"""Reading ``metrics.jsonl`` back: the reward curve, the end-of-run summary and ``omni-rl compare`` all read the
same rows, the same training clock and the same finite series, so they print and plot the same numbers."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """The rows in step order; a torn last line (a run killed mid-write) is skipped."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return sorted((r for r in rows if isinstance(r.get("step"), int)), key=lambda r: r["step"])


def training_clock(rows: list[dict[str, Any]]) -> dict[int, float]:
    """Seconds of training up to each step: the summed ``perf/step_s`` (validation and start-up excluded)."""
    clock: dict[int, float] = {0: 0.0}
    elapsed = 0.0
    for row in rows:
        elapsed += row.get("perf/step_s") or 0.0
        clock[row["step"]] = elapsed
    return clock


def is_finite_number(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def series(rows: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    """(steps, values) of ``key`` where it was logged and finite (a skipped step logs NaN: not plotted)."""
    points = [(r["step"], float(r[key])) for r in rows if is_finite_number(r.get(key))]
    return [s for s, _ in points], [v for _, v in points]
