"""Video rollouts in the run directory (omni_rl.reporting.video_grids): the grid PNG shows each video's frames side by
side, and
the animated grid beside it has one frame per video frame at the rollout's fps, as MP4 (PyAV), WebP or GIF;
images are unchanged."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from omni_rl.reporting.image_grids import render_grid
from omni_rl.reporting.video_grids import (
    frame_strips,
    mp4_encoder,
    read_video,
    save_samples,
    save_video,
    video_format_problem,
    video_suffix,
)

VIDEOS = np.random.default_rng(0).integers(0, 256, size=(3, 5, 16, 16, 3), dtype=np.uint8)
CAPTIONS = ["0.10 | a", "0.20 | b", "0.30 | c"]


def test_frame_strips_keep_the_first_and_last_frame() -> None:
    strips = frame_strips(VIDEOS, max_frames=3)
    assert strips.shape == (3, 16, 48, 3)
    np.testing.assert_array_equal(strips[:, :, :16], VIDEOS[:, 0])
    np.testing.assert_array_equal(strips[:, :, 16:32], VIDEOS[:, 2])
    np.testing.assert_array_equal(strips[:, :, 32:], VIDEOS[:, 4])
    assert frame_strips(VIDEOS[:, :2]).shape == (3, 16, 32, 3)  # fewer frames than the strip holds: all of them


def test_video_samples_write_a_strip_grid_and_an_animated_grid(tmp_path: Path) -> None:
    animated_format = "gif" if video_format_problem("webp") else "webp"  # Pillow's own formats, frame by frame
    path = save_samples(
        tmp_path / "samples_step_1.png", VIDEOS, CAPTIONS, columns=3, title="t", fps=8, video_format=animated_format
    )
    with Image.open(path) as grid:
        assert grid.width == 3 * 5 * 16  # five 16 px frames per cell, three cells a row
    animated = path.with_suffix(video_suffix(animated_format))
    with Image.open(animated) as video:
        assert video.n_frames == 5
        video.seek(1)
        video.load()
        assert video.info["duration"] == 125  # 8 fps
        for t in (0, 3):
            video.seek(t)
            expected = np.asarray(render_grid(VIDEOS[:, t], CAPTIONS, columns=3, title="t"))
            got = np.asarray(video.convert("RGB"))
            if animated.suffix == ".webp":  # lossless
                np.testing.assert_array_equal(got, expected)
            else:  # a GIF's palette: close, not equal
                assert np.abs(got.astype(int) - expected).mean() < 8


def test_image_samples_are_the_plain_grid(tmp_path: Path) -> None:
    path = save_samples(tmp_path / "val_step_0.png", VIDEOS[:, 0], CAPTIONS)
    assert path.is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["val_step_0.png"]


#: H.264 at CRF 18 on grids of random-noise cells (the worst case for it): measured a mean absolute error of 3.9
#: levels per channel over the grid, against about 60 to any other frame's grid; so twice that is held, and that
#: frame t is nearest grid t
MP4_MEAN_ERROR = 8


@pytest.mark.parametrize("video_format", ["mp4", "webp", "gif"])
def test_each_format_holds_every_frame_at_its_rate(tmp_path: Path, video_format: str) -> None:
    if video_format_problem(video_format):
        pytest.skip(video_format_problem(video_format))
    path = save_samples(tmp_path / "val_step_2.png", VIDEOS, CAPTIONS, columns=3, fps=8, video_format=video_format)
    frames, fps = read_video(path.with_suffix(f".{video_format}"))
    expected = np.stack([np.asarray(render_grid(VIDEOS[:, t], CAPTIONS, columns=3)) for t in range(5)])
    height, width = expected.shape[1:3]
    assert (frames.shape[0], fps) == (5, 8)
    if video_format == "mp4":  # yuv420p: padded to even sides with white
        assert frames.shape[1:3] == (height + height % 2, width + width % 2)
        frames = frames[:, :height, :width]
    error = np.abs(frames.astype(int)[:, None] - expected.astype(int)[None]).mean(axis=(2, 3, 4))
    assert (error.argmin(axis=1) == np.arange(5)).all()  # frame t is nearest grid t
    bound = {"mp4": MP4_MEAN_ERROR, "webp": 0, "gif": 8}[video_format]
    assert np.diag(error).max() <= bound


def test_auto_is_mp4_with_pyav_and_webp_without(monkeypatch: pytest.MonkeyPatch) -> None:
    assert mp4_encoder() is not None  # the test extra installs PyAV
    assert video_suffix("auto") == ".mp4"
    monkeypatch.setattr("omni_rl.reporting.video_formats.mp4_encoder", lambda: None)
    assert video_suffix("auto") == (".gif" if video_format_problem("webp") else ".webp")
    assert "pip install av" in video_format_problem("mp4")
    assert video_suffix("gif") == ".gif"


def test_mp4_pads_odd_sides_with_white(tmp_path: Path) -> None:
    if video_format_problem("mp4"):
        pytest.skip(video_format_problem("mp4"))
    frames = [Image.fromarray(np.full((15, 21, 3), (0, 0, 200), dtype=np.uint8)) for _ in range(3)]
    saved, fps = read_video(save_video(tmp_path / "odd.mp4", frames, fps=4))
    assert (saved.shape, fps) == ((3, 16, 22, 3), 4)
    assert np.abs(saved[:, :15, :21].astype(int) - (0, 0, 200)).mean() < 8
    assert saved[:, 15, :].min() > 230 and saved[:, :, 21].min() > 230  # the padding is the grid's white


def test_validating_a_config_imports_neither_pillow_nor_pyav() -> None:
    """``[log] video_format`` is checked by omni_rl.reporting.video_formats, which imports Pillow or PyAV only when
    asked
    about a format that needs them: loading the config schema stays light."""
    import json
    import subprocess
    import sys

    code = "import json, sys, omni_rl.config.schema; print(json.dumps([m for m in ('PIL', 'av') if m in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert json.loads(out) == []
