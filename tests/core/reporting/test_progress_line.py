"""The training progress off a terminal (a log file): qa-2026-12 found the bar printed once, at the end, with its
fields cut to 80 columns (``train ... 80... 0:... 0:...``). Each logged step now prints one whole line."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from omni_rl.reporting.metrics_logger import MetricsLogger, progress_line

METRICS = {"reward/mean": 0.5123, "val/reward/mean": 0.4, "actor/loss": 0.0012, "perf/step_s": 12.3}


def test_a_log_file_gets_one_whole_line_per_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    out = io.StringIO()
    console = Console(file=out, width=80, force_terminal=False)
    with MetricsLogger(tmp_path, ["console"], 10_000, console) as logger:
        logger.progress.update(logger.task, completed=2)  # a resumed run: steps 1-2 were done before
        for step in (3, 4):
            logger.log(step, METRICS)
            logger.print(f"checkpoint: {tmp_path}/checkpoints/step_{step}")
    lines = out.getvalue().splitlines()
    assert len(lines) == 4 and "\u2026" not in out.getvalue() and "\x1b[" not in out.getvalue()
    assert lines[0].startswith("train 3/10000  0:00:00 elapsed  ") and " left  " in lines[0]
    assert lines[0].endswith("mean=0.5123  val=0.4  loss=0.0012  step_s=12.3")
    assert lines[2].startswith("train 4/10000  ") and lines[3].endswith("step_4")


def test_the_line_names_every_field_whole() -> None:
    assert progress_line(80, 80, 3725.4, 0.0, "mean=0.5") == "train 80/80  1:02:05 elapsed  0:00:00 left  mean=0.5"
    assert progress_line(0, 80, 5.0, None, "") == "train 0/80  0:00:05 elapsed"
