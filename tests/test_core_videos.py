"""Video rollouts in the run directory (omni_rl.videos): the grid PNG shows each video's frames side by side, and
the animated grid beside it has one lossless frame per video frame at the rollout's fps; images are unchanged."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from omni_rl.images import render_grid
from omni_rl.videos import frame_strips, save_samples, video_suffix

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
    path = save_samples(tmp_path / "samples_step_1.png", VIDEOS, CAPTIONS, columns=3, title="t", fps=8)
    with Image.open(path) as grid:
        assert grid.width == 3 * 5 * 16  # five 16 px frames per cell, three cells a row
    animated = path.with_suffix(video_suffix())
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
