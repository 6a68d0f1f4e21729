"""Tiny detector and CLIP on disk, built once per test session."""

from __future__ import annotations

from pathlib import Path

import pytest
from geneval_tiny_models import save_tiny_clip, save_tiny_detector


@pytest.fixture(scope="session")
def tiny_detector_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_detector(tmp_path_factory.mktemp("mask2former"))


@pytest.fixture(scope="session")
def tiny_clip_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_clip(tmp_path_factory.mktemp("clip"))


@pytest.fixture(scope="session")
def tiny_options(tiny_detector_dir: Path, tiny_clip_dir: Path) -> dict[str, object]:
    """Reward / benchmark options pointing at the tiny models; low thresholds so random models keep boxes."""
    return {
        "detector": str(tiny_detector_dir),
        "clip_model": str(tiny_clip_dir),
        "threshold": 0.0,
        "counting_threshold": 0.0,
        "device": "cpu",
        "batch_size": 2,
    }
