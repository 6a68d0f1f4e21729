"""The shipped pretrained pipeline: small, loadable by path offline, and its val reward in [0.3, 0.6]."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import omni_rl_shapes
import pytest
from omni_rl_shapes.evaluate import RECORD_FILE, read_record, settings_from_record, val_reward

MAX_PACKAGE_BYTES = 20 * 2**20


def _bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def test_package_data_is_at_most_20_mb() -> None:
    package = Path(omni_rl_shapes.__file__).parent
    assert _bytes(omni_rl_shapes.pretrained_path()) <= MAX_PACKAGE_BYTES
    assert _bytes(package) <= MAX_PACKAGE_BYTES


def test_record_says_how_it_was_trained() -> None:
    path = omni_rl_shapes.pretrained_path()
    record = read_record(path)
    assert record["command"].startswith("python -m omni_rl_shapes.pretrain")
    assert {"seed", "wall_time_s", "transformer", "vae", "sampling", "val", "evals"} <= set(record)
    assert record["transformer"]["steps"] > 0
    # each continued stage names the one it started from, back to the from-scratch stage with the VAE recipe
    stage, stages = record, 1
    while stage.get("init_from"):
        stage, stages = stage["init_from"], stages + 1
        assert stage["command"].startswith("python -m omni_rl_shapes.pretrain")
    assert stage["vae"]["val_reconstruction_reward"] >= 0.99
    # a clean stage first, stray objects last (README, "Stray objects")
    assert 0.0 < record["stray_rate"] < 1.0 and not stage.get("stray_rate") and stages >= 2
    marker = json.loads((path / "omni_rl_tiny.json").read_text())
    assert marker["random_weights"] is False and marker["record"] == RECORD_FILE


def test_sd3_plugin_accepts_the_directory() -> None:
    from omni_rl_sd3.loading import check_pipeline_dir

    check_pipeline_dir(omni_rl_shapes.pretrained_path())


@pytest.fixture
def one_thread() -> Iterator[None]:
    """One torch thread: on a shared machine two threads stall each other at every barrier (4x slower here)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.usefixtures("one_thread")
def test_val_reward_is_in_band(monkeypatch: pytest.MonkeyPatch) -> None:
    """Re-measure what the record claims, with the recorded sampling settings (about 20 s on one core)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from diffusers import StableDiffusion3Pipeline

    path = omni_rl_shapes.pretrained_path()
    record = read_record(path)
    pipe = StableDiffusion3Pipeline.from_pretrained(path)
    pipe.set_progress_bar_config(disable=True)
    metrics = val_reward(pipe, omni_rl_shapes.read_prompts("val"), settings_from_record(record))
    assert 0.3 <= metrics["score"] <= 0.6
    # the same number as recorded, up to float differences between machines and thread counts
    assert metrics["score"] == pytest.approx(record["val"]["score"], abs=0.03)
