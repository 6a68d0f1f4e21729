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

from omni_rl.reporting.image_grids import save_grid
from omni_rl.reporting.reward_curve import plot_reward_curve

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


def test_the_reward_curve_draws_raw_smoothed_and_val_with_a_wall_clock_axis(tmp_path: Path, figures: list[Any]) -> None:
    metrics = _write_metrics(
        tmp_path / "metrics.jsonl",
        [
            {"step": 0, "val/reward/mean": 0.2},
            {"step": 1, "reward/mean": 0.1, "perf/step_s": 2.0},
            {"step": 2, "reward/mean": 0.3, "perf/step_s": 3.0, "val/reward/mean": 0.5},
            {"step": 3, "reward/mean": math.nan, "perf/step_s": 4.0},  # a skipped step: not plotted
        ],
    )
    out = plot_reward_curve(metrics, tmp_path / "reward_curve.png", factor=0.5)
    assert out == tmp_path / "reward_curve.png"
    assert Image.open(out).format == "PNG"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.jsonl", "reward_curve.png"], "no temporary file"

    (figure,) = figures
    main = figure.axes[0]
    assert main.get_xlabel() == "step" and main.get_ylabel() == "reward"
    lines = _lines(main)
    assert lines["train (raw)"] == ([1, 2], [0.1, 0.3])
    # debiased EMA, factor 0.5: 0.1, then (0.25*0.1 + 0.5*0.3) / 0.75
    assert lines["train (EMA 0.5)"][1] == pytest.approx([0.1, (0.025 + 0.15) / 0.75])
    assert lines["val (ODE, fixed seeds)"] == ([0, 2], [0.2, 0.5])
    # the top axis reads the summed step times at each step
    (top,) = main.child_axes
    assert top.get_xlabel() == "training wall-clock s"
    forward = top._functions[0]
    assert list(forward(np.asarray([0.0, 1.0, 2.0, 3.0]))) == [0.0, 2.0, 5.0, 9.0]


def test_one_panel_per_sub_score_and_eval_only_reward(tmp_path: Path, figures: list[Any]) -> None:
    metrics = _write_metrics(
        tmp_path / "metrics.jsonl",
        [
            {"step": 0, "val/reward/mean": 0.2, "val/reward/shapes/count": 0.5, "val/clip_score/mean": 0.3},
            {"step": 1, "reward/mean": 0.1, "reward/shapes/count": 0.4, "reward/std": 0.1, "perf/step_s": 1.0},
            {"step": 2, "reward/mean": 0.2, "reward/shapes/count": 0.6, "perf/step_s": 1.0, "val/reward/mean": 0.4},
        ],
    )
    plot_reward_curve(metrics, tmp_path / "reward_curve.png")
    (figure,) = figures
    titles = [ax.get_title() for ax in figure.axes[1:]]
    assert titles == ["shapes/count", "clip_score (eval only)"]
    count = _lines(figure.axes[1])
    assert count["train (raw)"] == ([1, 2], [0.4, 0.6]) and count["val (ODE, fixed seeds)"] == ([0], [0.5])
    assert _lines(figure.axes[2])["val (ODE, fixed seeds)"] == ([0], [0.3])


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


LONG_PROMPTS = [
    "a photo of a red circle to the left of a blue square and a green triangle above a yellow star on white",
    "an extraordinarily photorealistic watercolour illustration of two overlapping semitransparent hexagons",
    "supercalifragilisticexpialidocious-hyperdimensional-objects arranged in a grid | 0.123",
]


@pytest.mark.parametrize("prompt", LONG_PROMPTS)
@pytest.mark.parametrize("width", [60, 120, 250])
def test_captions_wrap_at_word_boundaries_never_mid_word(prompt: str, width: int) -> None:
    from PIL import ImageFont

    from omni_rl.reporting.image_grids import ELLIPSIS, wrap_caption

    font = ImageFont.load_default(size=10)
    lines = wrap_caption(prompt, width, font, max_lines=3)
    assert 1 <= len(lines) <= 3
    words = prompt.split()
    for line in lines:
        assert font.getlength(line) <= width, f"{line!r} is wider than {width} px"
        for token in line.split():
            # every token drawn is a whole word of the prompt, or a word cut with an ellipsis only when that one
            # word is wider than the line, or the ellipsis marking text left out
            if token == ELLIPSIS:
                continue
            if token.endswith(ELLIPSIS):
                whole = next(w for w in words if w.startswith(token[:-1]))
                assert font.getlength(whole) > width
            else:
                assert token in words, f"{token!r} is a piece of a word"
    # what is shown is the prompt's words in order
    shown = [t for line in lines for t in line.split() if t != ELLIPSIS]
    for token, word in zip(shown, words, strict=False):
        assert token == word or (token.endswith(ELLIPSIS) and word.startswith(token[:-1]))


def test_a_caption_that_fits_is_shown_whole() -> None:
    from PIL import ImageFont

    from omni_rl.reporting.image_grids import wrap_caption

    font = ImageFont.load_default(size=10)
    assert wrap_caption("a red circle | 0.50", 400, font) == ["a red circle | 0.50"]
    assert wrap_caption("", 100, font) == []


def test_the_grid_title_is_drawn_above_the_tiles(tmp_path: Path) -> None:
    images = np.full((2, 128, 128, 3), 255, dtype=np.uint8)
    plain = np.asarray(Image.open(save_grid(tmp_path / "a.png", images, ["x", "y"])).convert("RGB"))
    titled = np.asarray(
        Image.open(save_grid(tmp_path / "b.png", images, ["x", "y"], title="val step 10, seed 0")).convert("RGB")
    )
    extra = titled.shape[0] - plain.shape[0]
    assert extra > 0 and _has_ink(titled[:extra])


def test_reward_components_get_panels_only_when_several_are_weighted(tmp_path: Path, figures: list[Any]) -> None:
    one = [{"step": 1, "reward/mean": 0.1, "reward/jpeg/mean": 0.1, "perf/step_s": 1.0}]
    plot_reward_curve(_write_metrics(tmp_path / "one.jsonl", one), tmp_path / "one.png")
    two = [{"step": 1, "reward/mean": 0.1, "reward/jpeg/mean": 0.1, "reward/ocr/mean": 0.3, "perf/step_s": 1.0}]
    plot_reward_curve(_write_metrics(tmp_path / "two.jsonl", two), tmp_path / "two.png")
    first, second = figures
    assert len(first.axes) == 1
    assert [ax.get_title() for ax in second.axes[1:]] == ["jpeg/mean", "ocr/mean"]
