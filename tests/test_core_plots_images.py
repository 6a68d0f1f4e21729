"""What a run leaves to look at: the reward curve's two x axes and the sample grids' captions."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from omni_rl.images import save_grid
from omni_rl.plots import plot_reward_curve

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
plt = pytest.importorskip("matplotlib.pyplot")


@pytest.fixture
def figures(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """The figures plot_reward_curve closes, kept open for inspection (closed after the test)."""
    kept: list[Any] = []
    close = plt.close
    monkeypatch.setattr(plt, "close", kept.append)
    yield kept
    for figure in kept:
        close(figure)


def _write_metrics(path: Path, rows: list[dict[str, float]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _lines(axis: Any) -> dict[str, tuple[list[float], list[float]]]:
    return {line.get_label(): (list(line.get_xdata()), list(line.get_ydata())) for line in axis.get_lines()}


def test_the_reward_curve_has_a_step_axis_and_a_wall_clock_axis(tmp_path: Path, figures: list[Any]) -> None:
    metrics = _write_metrics(
        tmp_path / "metrics.jsonl",
        [
            {"step": 0, "val/reward/mean": 0.2},
            {"step": 1, "reward/mean": 0.1, "perf/step_s": 2.0},
            {"step": 2, "reward/mean": 0.3, "perf/step_s": 3.0, "val/reward/mean": 0.5},
            {"step": 3, "reward/mean": math.nan, "perf/step_s": 4.0},  # a skipped step: not plotted
        ],
    )
    out = plot_reward_curve(metrics, tmp_path / "reward_curve.png")
    assert out == tmp_path / "reward_curve.png"
    assert Image.open(out).format == "PNG"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.jsonl", "reward_curve.png"], "no temporary file"

    (figure,) = figures
    by_step, by_time = figure.axes
    assert [by_step.get_xlabel(), by_time.get_xlabel()] == ["step", "wall-clock seconds"]
    assert by_step.get_ylabel() == by_time.get_ylabel() == "reward"
    assert _lines(by_step) == {"train": ([1, 2], [0.1, 0.3]), "val (ODE, fixed seeds)": ([0, 2], [0.2, 0.5])}
    # wall-clock: the summed step times up to each step
    assert _lines(by_time) == {
        "train": ([2.0, 5.0], [0.1, 0.3]),
        "val (ODE, fixed seeds)": ([0.0, 5.0], [0.2, 0.5]),
    }


def test_no_metrics_no_curve(tmp_path: Path, figures: list[Any]) -> None:
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text("")
    assert plot_reward_curve(metrics, tmp_path / "reward_curve.png") is None
    assert not (tmp_path / "reward_curve.png").exists() and figures == []


def _has_ink(region: np.ndarray) -> bool:
    """Any clearly dark pixel (text) on the white caption band."""
    return bool((region.min(axis=-1) < 128).any())


def test_the_sample_grid_has_a_caption_band_under_each_tile(tmp_path: Path) -> None:
    images = np.zeros((3, 16, 16, 3), dtype=np.uint8)
    images[..., 0] = 255  # red tiles
    prompt = "a red circle on a white background, centred | 0.75"
    path = save_grid(tmp_path / "samples_step_1.png", images, [prompt, "a blue square | -1.00"], columns=8)
    grid = np.asarray(Image.open(path).convert("RGB"))
    cell = 128  # 16-pixel images are upscaled to be readable
    assert grid.shape[1] == 3 * cell
    assert grid.shape[0] > cell, "a caption band under the tiles"
    band = grid[cell:]
    assert (grid[:cell, : 3 * cell] == [255, 0, 0]).all(), "the tiles themselves are not drawn over"
    assert _has_ink(band[:, :cell]) and _has_ink(band[:, cell : 2 * cell])
    assert not _has_ink(band[:, 2 * cell :]), "a tile without a caption has an empty band"
    # the long caption wraps onto a second line; the short one does not
    assert _has_ink(band[14:26, :cell]) and not _has_ink(band[14:26, cell : 2 * cell])
    assert not list(tmp_path.glob("*.tmp.png"))


def test_the_grid_wraps_into_rows_each_with_its_band(tmp_path: Path) -> None:
    images = np.full((3, 128, 128, 3), 40, dtype=np.uint8)
    path = save_grid(tmp_path / "grid.png", images, ["one | 1.00", "two | 2.00", "three | 3.00"], columns=2)
    grid = np.asarray(Image.open(path).convert("RGB"))
    assert grid.shape[1] == 2 * 128
    row_height = grid.shape[0] // 2
    assert grid.shape[0] == 2 * row_height and row_height > 128
    second_band = grid[row_height + 128 : 2 * row_height, :128]
    assert _has_ink(second_band) and (second_band[-1] == 255).all()
