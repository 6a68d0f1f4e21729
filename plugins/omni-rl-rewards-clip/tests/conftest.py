"""Tiny models on disk, built once per test session, and the images and prompts the tests score."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from clip_tiny_models import (
    openclip_state_dict,
    save_aesthetic_mlp,
    save_tiny_clip,
    save_tiny_clip_vision,
    save_tiny_dinov2,
    save_tiny_processor_repo,
)


@pytest.fixture(scope="session")
def tiny_clip_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_clip(tmp_path_factory.mktemp("clip"), seed=0)


@pytest.fixture(scope="session")
def tiny_clip_vision_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_clip_vision(tmp_path_factory.mktemp("clip_vision"), seed=4)


@pytest.fixture(scope="session")
def tiny_dinov2_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_dinov2(tmp_path_factory.mktemp("dinov2"), seed=5)


@pytest.fixture(scope="session")
def tiny_processor_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_processor_repo(tmp_path_factory.mktemp("vit_h_processor"))


@pytest.fixture(scope="session")
def tiny_hps_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hps") / "HPS_v2.1_compressed.pt"
    torch.save({"state_dict": openclip_state_dict(seed=1)}, path)
    return path


@pytest.fixture(scope="session")
def tiny_aesthetic_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_aesthetic_mlp(tmp_path_factory.mktemp("aesthetic") / "sac+logos+ava1-l14-linearMSE.pth", seed=2)


@pytest.fixture
def sample_images() -> np.ndarray:
    """Five 40x40 uint8 RGB images: noise of different brightness, so their scores differ."""
    rng = np.random.default_rng(3)
    return np.stack([rng.integers(25 * k, 100 + 30 * k, size=(40, 40, 3), dtype=np.uint8) for k in range(5)])


@pytest.fixture
def sample_prompts() -> list[str]:
    return ["a red cat", "a photo of a dog on a sofa", "Blue Square!", "x", "two birds over the sea at dawn"]
