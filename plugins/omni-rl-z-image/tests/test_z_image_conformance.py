"""omni-rl's conformance suites on the ``z_image`` model (the session's tiny pipeline) and its hooks module.

Each class builds its model once (loading is the slow part), which the suite allows: its tests set the LoRA
weights they depend on themselves. The suite's batching check is what the list-of-tensors input makes hold: each
sample's caption goes to the transformer at its own length, so its velocity does not depend on the batch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from omni_rl_pipelines.testing import FullFineTuningChecks
from omni_rl_z_image import hooks
from omni_rl_z_image.model import ZImageModel

from omni_rl.config import structure_options
from omni_rl.context import BuildContext
from omni_rl.specs import ModelSpec
from omni_rl.testing import ModelConformance, PluginConformance


def _spec() -> ModelSpec:
    return next(s for s in hooks.omni_rl_models() if s.name == "z_image")


def _options(path: Path, **changes: Any) -> dict[str, Any]:
    """TOML-shaped options: the tiny pipeline, LoRA rank 4 with alpha 8 (a scale other than 1)."""
    return {"path": str(path), "lora_rank": 4, "lora_alpha": 8.0, **changes}


class TestZImagePlugin(PluginConformance):
    @pytest.fixture
    def hooks_module(self) -> str:
        return "omni_rl_z_image.hooks"


class TestZImageModel(ModelConformance):
    @pytest.fixture
    def spec(self) -> ModelSpec:
        return _spec()

    @pytest.fixture
    def options(self, tiny_z_path: Path) -> dict[str, Any]:
        return _options(tiny_z_path)

    @pytest.fixture(scope="class")
    def component(self, tiny_z_path: Path) -> ZImageModel:
        spec = _spec()
        return spec.factory(structure_options(spec, _options(tiny_z_path)), BuildContext(device="cpu"))

    @pytest.fixture
    def image_size(self) -> tuple[int, int]:
        return (32, 32)


class TestZImageModelFullFineTuning(FullFineTuningChecks, TestZImageModel):
    """``lora_rank = 0``: no adapters to switch off, and ``save_lora`` writes the whole transformer."""

    @pytest.fixture
    def options(self, tiny_z_path: Path) -> dict[str, Any]:
        return _options(tiny_z_path, lora_rank=0, lora_alpha=None)

    @pytest.fixture(scope="class")
    def component(self, tiny_z_path: Path) -> ZImageModel:
        spec = _spec()
        options = _options(tiny_z_path, lora_rank=0, lora_alpha=None)
        return spec.factory(structure_options(spec, options), BuildContext(device="cpu"))
