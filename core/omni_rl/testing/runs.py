"""Whole runs of a config through the CLI, as a user types them, for tests and benchmarks.

``omni-rl run CONFIG --set a=1 --set b=2`` is what every example test and benchmark runs; this builds that
command from a list of overrides, runs it in-process and reads the metrics back the way the run summary does."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any


def set_args(overrides: Iterable[str]) -> list[str]:
    """``["a=1", "b=2"]`` as the CLI's ``["--set", "a=1", "--set", "b=2"]``."""
    return [arg for override in overrides for arg in ("--set", override)]


def run_config(config: str | Path, output_dir: Path, overrides: Iterable[str] = ()) -> list[dict[str, Any]]:
    """``omni-rl run config`` into ``output_dir`` with ``overrides``; its ``metrics.jsonl`` rows in step order.

    A run that exits non-zero raises ``RuntimeError`` naming the command (the CLI has printed why)."""
    from omni_rl.cli import main
    from omni_rl.reporting.metrics_reader import read_metrics

    argv = ["run", str(config), *set_args([f"run.output_dir={output_dir}", *overrides])]
    if (code := main(argv)) != 0:
        raise RuntimeError(f"omni-rl {' '.join(argv)} exited {code}")
    return read_metrics(Path(output_dir) / "metrics.jsonl")
