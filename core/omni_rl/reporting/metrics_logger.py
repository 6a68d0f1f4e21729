"""Where metrics go: ``metrics.jsonl`` (always, one object per step), the rich console progress bar, and the
optional backends of :mod:`omni_rl.reporting.backends` (TensorBoard, wandb), which get every metric and image grid
too."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from omni_rl.errors import RuntimeFailure
from omni_rl.reporting.backends import Logger, build_loggers
from omni_rl.reporting.video_grids import DEFAULT_FPS, read_video

#: shown next to the progress bar, in this order, when present
HEADLINE = ("reward/mean", "val/reward/mean", "actor/loss", "actor/clip_frac", "perf/step_s")


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class MetricsLogger:
    """Appends each step's metrics to ``metrics.jsonl``, drives the console progress bar and forwards metrics and
    image grids to the external backends (``tensorboard``, ``wandb``) the config selects.

    ``config`` (the resolved, TOML-shaped config) is recorded by the backends that show a run's config; the run
    is named after its directory. ``first_step`` is the first step this logger will write (a resumed run's first
    recomputed step): backends that keep their own history hide what an earlier attempt logged from it on.

    Off a terminal (a log file, a pipe, CI) there is no bar to redraw: rich printed the bar once, at the end, cut to
    80 columns (``train ... 80... 0:... 0:...``). There each logged step prints one whole line instead
    (:func:`progress_line`), which is what a log file wants.
    """

    def __init__(
        self,
        run_dir: Path,
        backends: list[str],
        total_steps: int,
        console: Console,
        *,
        config: Mapping[str, Any] | None = None,
        first_step: int | None = None,
    ) -> None:
        # built first: an unknown or missing backend fails before anything is opened
        self.external: list[Logger] = build_loggers(
            backends, run_dir, run_dir.name, config or {}, first_step=first_step
        )
        self.path = run_dir / "metrics.jsonl"
        self.console = console
        self.show_console = "console" in backends
        #: off a terminal: one plain line per logged step instead of the live bar
        self.plain = self.show_console and not console.is_terminal
        self._started = time.monotonic()
        self._first_done: float | None = None  # steps already done when the first row was logged (a resume)
        self._file = self.path.open("a", encoding="utf-8")
        self.progress = Progress(
            TextColumn("[bold]train"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[headline]}"),
            console=console,
            disable=not self.show_console or self.plain,
        )
        self.task = self.progress.add_task("train", total=total_steps, headline="")

    def __enter__(self) -> MetricsLogger:
        self._started = time.monotonic()
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()
        self._file.close()
        for backend in self.external:  # after the progress bar, so a backend's closing words print below it
            backend.close()

    def log(self, step: int, metrics: dict[str, float], *, advance: bool = True) -> None:
        record = {"step": step, **{k: _jsonable(float(v)) for k, v in sorted(metrics.items())}}
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()
        for backend in self.external:
            backend.log_metrics(step, {k: float(v) for k, v in metrics.items()})
        headline = "  ".join(
            f"{key.split('/')[-1] if key != 'val/reward/mean' else 'val'}={metrics[key]:.4g}"
            for key in HEADLINE
            if key in metrics
        )
        task = self.progress.tasks[0]
        if self._first_done is None:
            self._first_done = float(task.completed)
        self.progress.update(self.task, advance=1 if advance else 0, headline=headline)
        if self.plain:
            elapsed = time.monotonic() - self._started
            done = task.completed - self._first_done
            left = elapsed / done * (task.total - task.completed) if done > 0 and task.total is not None else None
            line = progress_line(int(task.completed), int(task.total or 0), elapsed, left, headline)
            self.console.print(line, markup=False, highlight=False, soft_wrap=True)

    def log_images(self, step: int, tag: str, path_or_array: Path | str | np.ndarray) -> None:
        """Send an image grid (a saved PNG, or uint8 (H, W, 3)) to the backends that show images."""
        if not self.external:
            return  # console and jsonl show no images; the PNG is already in the run directory
        image = _image_array(path_or_array)
        for backend in self.external:
            backend.log_images(step, tag, image)

    def log_video(self, step: int, tag: str, path_or_frames: Path | str | np.ndarray, fps: int | None = None) -> None:
        """Send a video (a saved animated grid, or uint8 (F, H, W, 3) frames) to the backends that show videos.
        A saved file's own frame rate is used unless ``fps`` is given."""
        if not self.external:
            return  # the animated grid is already in the run directory
        if isinstance(path_or_frames, np.ndarray):
            frames, rate = path_or_frames, fps or DEFAULT_FPS
        else:
            frames, file_rate = read_video(path_or_frames)
            rate = fps or file_rate
        if frames.dtype != np.uint8 or frames.ndim != 4 or frames.shape[3] != 3:
            raise RuntimeFailure(
                f"log_video expects uint8 (F, H, W, 3) frames, got {frames.dtype} {frames.shape}",
                hint="pass the saved animated grid's path or an RGB uint8 array of frames",
            )
        for backend in self.external:
            backend.log_video(step, tag, frames, rate)

    def print(self, message: str) -> None:
        """A line above the bar (rich markup), never folded: a checkpoint path or a reward's failure stays whole in
        a log file, where rich would otherwise wrap it at 80 columns."""
        if self.show_console:
            self.progress.console.print(message, soft_wrap=True)


def progress_line(done: int, total: int, elapsed: float, left: float | None, headline: str) -> str:
    """``train 3/80  0:00:42 elapsed  0:17:58 left  mean=0.51  loss=0.0012``: the bar's fields, whole, as text."""
    remaining = f"  {_duration(left)} left" if left is not None else ""
    return f"train {done}/{total}  {_duration(elapsed)} elapsed{remaining}" + (f"  {headline}" if headline else "")


def _duration(seconds: float) -> str:
    whole = max(int(seconds), 0)
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


def _image_array(path_or_array: Path | str | np.ndarray) -> np.ndarray:
    if isinstance(path_or_array, np.ndarray):
        image = path_or_array
    else:
        from PIL import Image

        with Image.open(path_or_array) as opened:
            image = np.asarray(opened.convert("RGB"))
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise RuntimeFailure(
            f"log_images expects a uint8 (H, W, 3) image, got {image.dtype} {image.shape}",
            hint="pass the saved grid's path or an RGB uint8 array",
        )
    return image
