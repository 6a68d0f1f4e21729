"""Sample and val grids of video rollouts: a PNG of each video's frames side by side, and the grid as a video.

A video model's rollout gives frames (N, F, H, W, 3) (docs/hooks.md, "Video"). The run directory then gets, beside
``samples_step_<N>.png`` / ``val_step_<N>.png`` (each cell a strip of up to :data:`STRIP_FRAMES` frames, evenly
spaced from the first to the last, so a still view shows the motion), the same grid animated: one grid per frame
time, captions and all, written as ``.webp`` (animated, lossless, through Pillow) or ``.gif`` where this Pillow has
no WebP support. No video encoder is needed: MP4 would take ffmpeg or PyAV, a heavy dependency for a preview.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image, ImageSequence, features

from omni_rl.images import render_grid, save_grid

#: frames drawn side by side in a grid cell
STRIP_FRAMES = 8
#: what sample videos play at when the rollout does not say (its ``fps`` option)
DEFAULT_FPS = 16


def frame_strips(videos: np.ndarray, max_frames: int = STRIP_FRAMES) -> np.ndarray:
    """(N, F, H, W, 3) -> (N, H, k·W, 3): up to ``max_frames`` frames per video side by side, the first and the last
    always among them."""
    frames = videos.shape[1]
    picks = np.unique(np.round(np.linspace(0, frames - 1, min(frames, max_frames))).astype(int))
    return np.concatenate([videos[:, i] for i in picks], axis=2)


def video_suffix() -> str:
    """``.webp`` where Pillow can write animated WebP, else ``.gif``."""
    return ".webp" if features.check("webp") else ".gif"


def frame_duration_ms(fps: int) -> int:
    """One frame's display time in whole milliseconds (what WebP and GIF store)."""
    return max(1, round(1000 / fps))


def read_video(path: Path | str) -> tuple[np.ndarray, int]:
    """An animated image written by :func:`save_video` as frames (F, H, W, 3) uint8 and its frames per second."""
    with Image.open(path) as opened:
        frames = [np.asarray(frame.convert("RGB")) for frame in ImageSequence.Iterator(opened)]
        duration = opened.info.get("duration") or frame_duration_ms(DEFAULT_FPS)
    return np.stack(frames), max(1, round(1000 / duration))


def gif_bytes(frames: np.ndarray, fps: int) -> bytes:
    """Frames (F, H, W, 3) uint8 as an animated GIF looping forever: the one animated format TensorBoard's image
    tab and W&B's video panel both play, encoded by Pillow (no ffmpeg or moviepy)."""
    buffer = io.BytesIO()
    images = [Image.fromarray(frame) for frame in frames]
    images[0].save(
        buffer, format="GIF", save_all=True, append_images=images[1:], duration=frame_duration_ms(fps), loop=0
    )
    return buffer.getvalue()


def save_video(path: Path, frames: Sequence[Image.Image], fps: int) -> Path:
    """Write ``frames`` as an animated image (WebP lossless, or GIF) looping forever; atomically."""
    duration = frame_duration_ms(fps)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    options = {"lossless": True} if path.suffix == ".webp" else {}
    frames[0].save(
        tmp,
        format=path.suffix[1:].upper(),
        save_all=True,
        append_images=list(frames[1:]),
        duration=duration,
        loop=0,
        **options,
    )
    tmp.replace(path)
    return path


def save_samples(
    path: Path,
    images: np.ndarray,
    captions: Sequence[str],
    *,
    columns: int = 8,
    title: str | None = None,
    fps: int = DEFAULT_FPS,
) -> Path:
    """The grid PNG at ``path`` (what loggers show); for videos also the animated grid beside it (same stem).
    Images (N, H, W, 3) are exactly :func:`omni_rl.images.save_grid`."""
    array = np.asarray(images)
    if array.ndim == 4:
        return save_grid(path, array, captions, columns=columns, title=title)
    save_grid(path, frame_strips(array), captions, columns=columns, title=title)
    frames = [render_grid(array[:, t], captions, columns=columns, title=title) for t in range(array.shape[1])]
    save_video(path.with_suffix(video_suffix()), frames, fps)
    return path
