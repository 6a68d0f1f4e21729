"""Optional metric backends of ``[log] backends``: TensorBoard and Weights & Biases.

``console`` and ``jsonl`` are built into :class:`omni_rl.reporting.metrics_logger.MetricsLogger` (``metrics.jsonl`` is
always
written, so a run's record never depends on an optional package); this module owns the backends that need a
third-party package. Each is imported only when selected, so a config without them never pays for the import
and an environment without them still trains.
"""

from __future__ import annotations

import difflib
import importlib
import io
import json
import os
import re
import uuid
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, runtime_checkable

import numpy as np

from omni_rl.errors import ConfigError, RuntimeFailure
from omni_rl.reporting.video_grids import gif_bytes

#: Backends handled by MetricsLogger itself (no Logger object is built for them).
BUILTIN_BACKENDS: tuple[str, ...] = ("console", "jsonl")
#: Every name ``[log] backends`` accepts, in the order the docs list them.
AVAILABLE_BACKENDS: tuple[str, ...] = (*BUILTIN_BACKENDS, "tensorboard", "wandb")
#: Where the wandb run id is kept, so a resumed run appends to the same wandb run instead of starting a new one.
WANDB_ID_FILE = "wandb_run_id.txt"
#: Default wandb project when ``WANDB_PROJECT`` is not set.
WANDB_DEFAULT_PROJECT = "omni-rl"


@runtime_checkable
class Logger(Protocol):
    """One external metrics backend. Steps are the training step (0 = before training)."""

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        """Record scalar metrics of ``step``."""

    def log_images(self, step: int, tag: str, image: np.ndarray) -> None:
        """Record one uint8 (H, W, 3) image (a sample or validation grid) under ``tag``."""

    def log_video(self, step: int, tag: str, frames: np.ndarray, fps: int) -> None:
        """Record one uint8 (F, H, W, 3) video (the animated grid of a video model's samples) under ``tag``."""

    def close(self) -> None:
        """Flush and release the backend; called once when the run ends (or fails)."""


def check_backends(backends: list[str]) -> None:
    """Raise ConfigError naming every unknown backend, before anything is started."""
    unknown = [name for name in backends if name not in AVAILABLE_BACKENDS]
    if not unknown:
        return
    names = ", ".join(repr(name) + _suggestion(name) for name in unknown)
    plural = "s" if len(unknown) > 1 else ""
    raise ConfigError(
        f"unknown log backend{plural} {names} @ $.log.backends",
        hint=f"available: {', '.join(AVAILABLE_BACKENDS)}",
    )


def _suggestion(name: str) -> str:
    close = difflib.get_close_matches(name, AVAILABLE_BACKENDS, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def build_loggers(
    backends: list[str],
    run_dir: Path,
    run_name: str,
    config_dict: Mapping[str, Any],
    *,
    first_step: int | None = None,
) -> list[Logger]:
    """The external loggers ``backends`` selects, in order (``console``/``jsonl`` are accepted and skipped).

    ``config_dict`` is the resolved, TOML-shaped config; backends that show a run's config record it.
    ``first_step`` (None: not known) is the first step that will be logged; TensorBoard hides the events an
    earlier attempt wrote from that step on, so steps a resumed run recomputes do not show twice.
    Raises ConfigError for an unknown name and RuntimeFailure when a selected backend's package is missing.
    """
    check_backends(backends)
    loggers: list[Logger] = []
    try:
        for name in dict.fromkeys(backends):  # a repeated name logs once
            if name == "tensorboard":
                loggers.append(TensorBoardLogger(run_dir, config_dict, purge_step=first_step))
            elif name == "wandb":
                loggers.append(WandbLogger(run_dir, run_name, config_dict))
    except BaseException:
        for logger in loggers:  # the ones already started must not be left open
            logger.close()
        raise
    return loggers


def _require(backend: str) -> ModuleType:
    """Import the package of the same name as the backend, or say which pip command installs it."""
    try:
        return importlib.import_module(backend)
    except ImportError as exc:
        raise RuntimeFailure(
            f"log backend {backend!r} needs the {backend!r} package, which is not importable ({exc})",
            hint=f"pip install {backend}   (or remove {backend!r} from [log] backends)",
        ) from exc


class TensorBoardLogger:
    """Scalars and images as TensorBoard event files in ``<run_dir>/tensorboard`` (``tensorboard --logdir``)."""

    def __init__(self, run_dir: Path, config_dict: Mapping[str, Any], purge_step: int | None = None) -> None:
        # torch.utils.tensorboard hides which package is missing; importing tensorboard first names it
        _require("tensorboard")
        from torch.utils.tensorboard import SummaryWriter

        self.log_dir = Path(run_dir) / "tensorboard"
        # purge_step: TensorBoard drops the events of earlier files at or after it (a resume recomputes them)
        self.writer = SummaryWriter(log_dir=str(self.log_dir), purge_step=purge_step)
        # TensorBoard's text tab renders markdown: indenting by 4 spaces shows the config verbatim
        text = "\n".join("    " + line for line in _config_json(config_dict).splitlines())
        self.writer.add_text("config", text, global_step=0)

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        for key, value in metrics.items():
            self.writer.add_scalar(key, float(value), global_step=step)
        self.writer.flush()  # a crashed run still shows every logged step

    def log_images(self, step: int, tag: str, image: np.ndarray) -> None:
        self.writer.add_image(tag, image, global_step=step, dataformats="HWC")
        self.writer.flush()

    def log_video(self, step: int, tag: str, frames: np.ndarray, fps: int) -> None:
        # SummaryWriter.add_video encodes through moviepy, a heavy optional package; TensorBoard's image tab plays
        # an image summary holding a GIF, which is what add_video writes too, so the GIF is encoded by Pillow here
        from tensorboard.compat.proto.summary_pb2 import Summary

        _, height, width, _ = frames.shape
        image = Summary.Image(height=height, width=width, colorspace=3, encoded_image_string=gif_bytes(frames, fps))
        self.writer._get_file_writer().add_summary(Summary(value=[Summary.Value(tag=tag, image=image)]), step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandbLogger:
    """A Weights & Biases run whose files live in ``<run_dir>/wandb``.

    Project and display name come from ``WANDB_PROJECT`` / ``WANDB_NAME`` (defaults: ``omni-rl`` and the run
    directory's name); ``WANDB_MODE=offline`` logs locally for a later ``wandb sync``. The run id is stored in
    ``<run_dir>/wandb_run_id.txt`` and reused, so a resumed omni-rl run continues the same wandb run.
    """

    def __init__(self, run_dir: Path, run_name: str, config_dict: Mapping[str, Any]) -> None:
        self.wandb = _require("wandb")
        run_dir = Path(run_dir)
        self.run_id = _wandb_run_id(run_dir)
        try:
            self.run = self.wandb.init(
                project=os.environ.get("WANDB_PROJECT") or WANDB_DEFAULT_PROJECT,
                name=os.environ.get("WANDB_NAME") or run_name,
                dir=str(run_dir),
                id=self.run_id,
                resume="allow",
                config=dict(config_dict),
            )
        except Exception as exc:  # wandb raises its own errors (auth, network, usage) for one user-fixable problem
            raise RuntimeFailure(
                f"could not start the wandb run: {exc}",
                hint="run `wandb login`, or set WANDB_MODE=offline to log locally and `wandb sync` later "
                "(or remove 'wandb' from [log] backends)",
            ) from exc

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        self.run.log({key: float(value) for key, value in metrics.items()}, step=step)

    def log_images(self, step: int, tag: str, image: np.ndarray) -> None:
        self.run.log({tag: self.wandb.Image(image)}, step=step)

    def log_video(self, step: int, tag: str, frames: np.ndarray, fps: int) -> None:
        # a GIF from Pillow: wandb.Video of raw frames would need moviepy and imageio to encode them
        video = self.wandb.Video(io.BytesIO(gif_bytes(frames, fps)), format="gif")
        self.run.log({tag: video}, step=step)

    def close(self) -> None:
        self.run.finish()


_WANDB_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def _wandb_run_id(run_dir: Path) -> str:
    """The run id stored in the run directory, or a new one (``WANDB_RUN_ID`` if set) written there."""
    path = run_dir / WANDB_ID_FILE
    if path.is_file():
        stored = path.read_text(encoding="utf-8").strip()
        if not _WANDB_ID.match(stored):
            raise RuntimeFailure(
                f"{path} does not hold a wandb run id (got {stored[:80]!r})",
                hint=f"delete {path} to start a new wandb run for this run directory",
            )
        return stored
    run_id = os.environ.get("WANDB_RUN_ID") or uuid.uuid4().hex[:12]
    run_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(run_id + "\n", encoding="utf-8")
    return run_id


def _config_json(config_dict: Mapping[str, Any]) -> str:
    """The config as indented JSON (values JSON lacks written as strings), for backends that show text."""
    return json.dumps(config_dict, indent=2, default=str)
