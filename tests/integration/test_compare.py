"""``omni-rl compare`` on two real short runs: one overlay PNG, a summary table per run, labels from the configs."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from omni_rl.cli import main


def test_compare_two_short_runs(
    small_jpeg_run, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    small_jpeg_run(tmp_path / "a", 1, "run.seed=0")
    small_jpeg_run(tmp_path / "b", 1, "run.seed=1")
    capsys.readouterr()
    out = tmp_path / "overlay.png"
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(out)]) == 0
    assert Image.open(out).format == "PNG"
    printed = capsys.readouterr().out
    assert "run.seed=0" in printed and "run.seed=1" in printed  # labels: what differs between the configs
    assert "omni-rl export" in printed and "checkpoints" in printed  # where the last checkpoint is, how to export
    assert f"wrote {out}" in printed
