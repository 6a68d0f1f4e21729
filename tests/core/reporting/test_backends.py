"""The optional ``[log] backends``: name checks, missing packages, TensorBoard event files, an offline wandb run.

The TensorBoard and wandb tests read back what a reader of those tools would see (TensorBoard's own
EventAccumulator; the records of wandb's offline run file), not just that a directory appeared.
"""

from __future__ import annotations

import io
import json
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageSequence
from rich.console import Console

from omni_rl.errors import ConfigError, RuntimeFailure
from omni_rl.reporting.backends import WANDB_ID_FILE, build_loggers
from omni_rl.reporting.image_grids import save_grid
from omni_rl.reporting.metrics_logger import MetricsLogger
from omni_rl.reporting.video_grids import save_video, video_format_problem, video_suffix

CONFIG = {"run": {"steps": 2, "seed": 0}, "log": {"backends": ["jsonl"]}}


def _metrics_logger(run_dir: Path, backends: list[str]) -> MetricsLogger:
    return MetricsLogger(run_dir, backends, 2, Console(file=io.StringIO()), config=CONFIG)


def _grid(tmp_path: Path) -> Path:
    images = np.zeros((2, 16, 16, 3), dtype=np.uint8)
    images[1] = 255
    return save_grid(tmp_path / "grid.png", images, ["a", "b"])


# -- names and packages ----------------------------------------------------------------------------------


def test_unknown_backend_is_a_config_error_listing_the_available_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        build_loggers(["console", "tensorbord"], tmp_path, "run", CONFIG)
    assert info.value.message == "unknown log backend 'tensorbord' (did you mean 'tensorboard'?) @ $.log.backends"
    assert info.value.hint == "available: console, jsonl, tensorboard, wandb"
    assert info.value.exit_code == 2


def test_every_unknown_backend_is_named_at_once_and_nothing_is_written(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        _metrics_logger(tmp_path, ["mlflow", "jsonl", "stdout"])
    assert info.value.message == "unknown log backends 'mlflow', 'stdout' @ $.log.backends"
    assert not (tmp_path / "metrics.jsonl").exists()


def test_builtin_backends_build_no_external_logger(tmp_path: Path) -> None:
    assert build_loggers(["console", "jsonl"], tmp_path, "run", CONFIG) == []


@pytest.mark.parametrize("backend", ["tensorboard", "wandb"])
def test_missing_package_says_which_pip_command_installs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    monkeypatch.setitem(sys.modules, backend, None)  # makes `import <backend>` fail as if not installed
    with pytest.raises(RuntimeFailure) as info:
        build_loggers(["jsonl", backend], tmp_path, "run", CONFIG)
    assert info.value.message.startswith(f"log backend {backend!r} needs the {backend!r} package")
    assert info.value.hint == f"pip install {backend}   (or remove {backend!r} from [log] backends)"
    assert info.value.exit_code == 1


def test_backend_packages_are_imported_only_when_selected(tmp_path: Path) -> None:
    code = (
        "import sys; from pathlib import Path; from omni_rl.reporting.metrics_logger import MetricsLogger; "
        "from omni_rl.reporting.backends import build_loggers; "
        f"build_loggers(['console', 'jsonl'], Path({str(tmp_path)!r}), 'run', {{}}); "
        "print(sorted(m for m in ('wandb', 'tensorboard', 'torch') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# -- TensorBoard -----------------------------------------------------------------------------------------


def test_tensorboard_event_file_holds_the_metrics_and_images(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    grid = _grid(tmp_path)
    with _metrics_logger(tmp_path, ["jsonl", "tensorboard"]) as logger:
        logger.log(1, {"reward/mean": 0.25, "actor/loss": float("nan")})
        logger.log_images(1, "images/train", grid)
        logger.log(2, {"reward/mean": 0.5, "actor/loss": 1.5})
        logger.log_images(2, "images/val", np.full((8, 12, 3), 7, dtype=np.uint8))

    assert list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars("reward/mean")] == [(1, 0.25), (2, 0.5)]
    assert [e.step for e in events.Scalars("actor/loss")] == [1, 2]
    train_image = events.Images("images/train")[0]
    with Image.open(grid) as opened:
        grid_w, grid_h = opened.size
    assert (train_image.step, train_image.height, train_image.width) == (1, grid_h, grid_w)
    val_image = events.Images("images/val")[0]
    assert (val_image.step, val_image.height, val_image.width) == (2, 8, 12)
    # jsonl stays on whatever else is selected
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert rows[0] == {"step": 1, "actor/loss": None, "reward/mean": 0.25}


def _video(tmp_path: Path, fps: int = 8) -> tuple[Path, np.ndarray]:
    """An animated grid as a video run writes it (lossless WebP, so the frames compare exactly), and its frames: a
    square that moves one pixel per frame."""
    frames = np.full((5, 12, 16, 3), 255, dtype=np.uint8)
    for t in range(5):
        frames[t, 4:8, 2 + t : 6 + t] = (200, 0, 0)
    lossless = "gif" if video_format_problem("webp") else "webp"  # a GIF's palette keeps these few colours exact
    path = save_video(tmp_path / f"samples_step_1{video_suffix(lossless)}", [Image.fromarray(f) for f in frames], fps)
    return path, frames


def test_tensorboard_plays_a_video_as_an_animated_image(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    path, frames = _video(tmp_path)
    with _metrics_logger(tmp_path, ["tensorboard"]) as logger:
        logger.log_video(1, "videos/train", path)
        logger.log_video(2, "videos/val", frames, fps=4)
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    for tag, step, fps in (("videos/train", 1, 8), ("videos/val", 2, 4)):
        (event,) = events.Images(tag)
        assert (event.step, event.height, event.width) == (step, 12, 16)
        with Image.open(io.BytesIO(event.encoded_image_string)) as gif:
            assert (gif.format, gif.n_frames) == ("GIF", 5)
            assert gif.info["duration"] == pytest.approx(1000 / fps, abs=10)  # GIF stores hundredths of a second
            decoded = [np.asarray(frame.convert("RGB")) for frame in ImageSequence.Iterator(gif)]
        # GIF is paletted: these few flat colours come back exactly, so the motion is the saved one
        np.testing.assert_array_equal(np.stack(decoded), frames)


def test_a_video_needs_uint8_frames(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    with _metrics_logger(tmp_path, ["tensorboard"]) as logger, pytest.raises(RuntimeFailure, match=r"\(F, H, W, 3\)"):
        logger.log_video(1, "videos/train", np.zeros((5, 12, 16), dtype=np.uint8))


def test_without_external_backends_a_video_is_not_even_read(tmp_path: Path) -> None:
    with _metrics_logger(tmp_path, ["console", "jsonl"]) as logger:
        logger.log_video(1, "videos/train", tmp_path / "missing.webp")  # the run directory already has it


def test_tensorboard_after_a_resume_shows_each_recomputed_step_once(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    with MetricsLogger(tmp_path, ["tensorboard"], 4, Console(file=io.StringIO()), first_step=0) as logger:
        for step in (1, 2, 3):  # killed after step 3; the checkpoint of step 1 is the latest
            logger.log(step, {"reward/mean": float(step)})
    with MetricsLogger(tmp_path, ["tensorboard"], 4, Console(file=io.StringIO()), first_step=2) as logger:
        for step in (2, 3, 4):
            logger.log(step, {"reward/mean": 10.0 * step})
    assert len(list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))) == 2
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars("reward/mean")] == [(1, 1.0), (2, 20.0), (3, 30.0), (4, 40.0)]


def test_bad_image_is_a_clear_error(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    with _metrics_logger(tmp_path, ["tensorboard"]) as logger, pytest.raises(RuntimeFailure, match="uint8"):
        logger.log_images(1, "images/train", np.zeros((8, 8), dtype=np.float32))


# -- wandb (offline) -------------------------------------------------------------------------------------


@pytest.fixture
def wandb_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    for name in ("WANDB_PROJECT", "WANDB_NAME", "WANDB_RUN_ID", "WANDB_DIR"):
        monkeypatch.delenv(name, raising=False)
    for name in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR", "WANDB_ARTIFACT_DIR"):
        monkeypatch.setenv(name, str(tmp_path / "wandb-home" / name.lower()))


def _wandb_records(path: Path) -> Iterator[object]:
    """The protobuf records of a ``run-<id>.wandb`` file: a 7-byte file header, then LevelDB-log blocks of
    32 KiB whose records carry a 7-byte header (crc32, little-endian length, type: 1 full, 2 first, 3 middle,
    4 last)."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B", data[:7]
    block, offset, pending = 32768, 7, b""
    while offset + 7 <= len(data):
        left = block - offset % block
        if left < 7:  # block trailer too short for a header: zero padding
            offset += left
            continue
        length, kind = struct.unpack_from("<HB", data, offset + 4)
        if (length == 0 and kind == 0) or offset + 7 + length > len(data):
            break  # end of the records written so far
        chunk = data[offset + 7 : offset + 7 + length]
        offset += 7 + length
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            yield record


def _finished_records(run_file: Path, timeout: float = 20.0) -> list[object]:
    """The run file's records once its ``exit`` record is on disk: wandb's ``finish()`` can return before its
    background service has flushed the offline file, so this polls (an unfinished file fails after timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        records = list(_wandb_records(run_file))
        if any(r.WhichOneof("record_type") == "exit" for r in records) or time.monotonic() > deadline:
            return records
        time.sleep(0.05)


def _history(run_file: Path) -> list[dict[str, object]]:
    """One dict per history record; a nested value (an image's fields) appears as ``"<key>.<field>"``."""
    rows = []
    for record in _finished_records(run_file):
        if record.WhichOneof("record_type") == "history":
            items = record.history.item
            rows.append({item.key or ".".join(item.nested_key): json.loads(item.value_json) for item in items})
    return rows


@pytest.mark.usefixtures("wandb_offline")
def test_wandb_offline_run_records_metrics_images_and_config(tmp_path: Path) -> None:
    run_dir = tmp_path / "my-run"
    run_dir.mkdir()
    grid = _grid(tmp_path)
    with _metrics_logger(run_dir, ["console", "jsonl", "wandb"]) as logger:
        logger.log(1, {"reward/mean": 0.25})
        logger.log_images(2, "images/train", grid)
        logger.log(2, {"reward/mean": 0.5})

    run_id = (run_dir / WANDB_ID_FILE).read_text().strip()
    (offline,) = (run_dir / "wandb").glob(f"offline-run-*-{run_id}")
    history = _history(offline / f"run-{run_id}.wandb")
    by_step = {row["_step"]: row for row in history}
    assert by_step[1]["reward/mean"] == 0.25
    assert by_step[2]["reward/mean"] == 0.5
    with Image.open(grid) as opened:
        assert (by_step[2]["images/train._type"], by_step[2]["images/train.width"]) == ("image-file", opened.width)
    assert list((offline / "files" / "media" / "images").rglob("*.png"))
    records = _finished_records(offline / f"run-{run_id}.wandb")
    run_record = next(r.run for r in records if r.WhichOneof("record_type") == "run")
    assert (run_record.project, run_record.display_name) == ("omni-rl", "my-run")
    config = {item.key: json.loads(item.value_json) for item in run_record.config.update}
    assert config["run"] == CONFIG["run"]


@pytest.mark.usefixtures("wandb_offline")
def test_wandb_offline_run_records_a_video(tmp_path: Path) -> None:
    path, frames = _video(tmp_path)
    with _metrics_logger(tmp_path, ["wandb"]) as logger:
        logger.log_video(3, "videos/val", path)
    run_id = (tmp_path / WANDB_ID_FILE).read_text().strip()
    (offline,) = (tmp_path / "wandb").glob(f"offline-run-*-{run_id}")
    (row,) = _history(offline / f"run-{run_id}.wandb")
    assert (row["_step"], row["videos/val._type"]) == (3, "video-file")
    (gif,) = (offline / "files" / "media" / "videos").rglob("*.gif")
    with Image.open(gif) as opened:
        assert (opened.n_frames, opened.size) == (len(frames), (16, 12))


@pytest.mark.usefixtures("wandb_offline")
def test_wandb_resumed_run_continues_the_same_run_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WANDB_PROJECT", "my-project")
    with _metrics_logger(tmp_path, ["wandb"]) as logger:
        logger.log(1, {"reward/mean": 0.25})
    first_id = (tmp_path / WANDB_ID_FILE).read_text().strip()
    with _metrics_logger(tmp_path, ["wandb"]) as logger:
        logger.log(2, {"reward/mean": 0.5})
    assert (tmp_path / WANDB_ID_FILE).read_text().strip() == first_id
    runs = sorted((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 2
    # wandb names each (re)start offline-run-<time>-<id>, adding "-1" when two start in the same second
    assert all(f"-{first_id}" in run.name for run in runs)
    last = _history(runs[-1] / f"run-{first_id}.wandb")
    assert [row["reward/mean"] for row in last] == [0.5]
