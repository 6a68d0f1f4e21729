"""Shared fixtures: one tiny random SD3 pipeline per session, built offline, and one embedded Ray."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("DIFFUSERS_VERBOSITY", "error")

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_sd3_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from omni_rl_sd3.tiny import build_tiny_sd3_pipeline

    return Path(build_tiny_sd3_pipeline(tmp_path_factory.mktemp("sd3") / "tiny", seed=0))


@pytest.fixture(scope="module")
def ray_cluster():
    from omni_rl.testing.ray import local_ray

    with local_ray():  # reused when the whole-repo session already runs one
        yield
