"""omni-rl's conformance suites on the ``qwen_image`` model (the session's tiny pipeline) and its hooks module.

Each class builds its model once (loading is the slow part), which the suite allows: its tests set the LoRA
weights they depend on themselves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from omni_rl_pipelines.testing import FullFineTuningChecks
from omni_rl_qwen_image import hooks
from omni_rl_qwen_image.model import QwenImageModel

from omni_rl.config import structure_options
from omni_rl.context import BuildContext
from omni_rl.specs import ModelSpec
from omni_rl.testing import ModelConformance, PluginConformance


def _spec() -> ModelSpec:
    spec = next(s for s in hooks.omni_rl_models() if s.name == "qwen_image")
    return spec


def _options(path: Path, **changes: Any) -> dict[str, Any]:
    """TOML-shaped options: the tiny pipeline, LoRA rank 4 with alpha 8 (a scale other than 1)."""
    return {"path": str(path), "lora_rank": 4, "lora_alpha": 8.0, **changes}


class TestQwenImagePlugin(PluginConformance):
    @pytest.fixture
    def hooks_module(self) -> str:
        return "omni_rl_qwen_image.hooks"


class TestQwenImageModel(ModelConformance):
    @pytest.fixture
    def spec(self) -> ModelSpec:
        return _spec()

    @pytest.fixture
    def options(self, tiny_qwen_path: Path) -> dict[str, Any]:
        return _options(tiny_qwen_path)

    @pytest.fixture(scope="class")
    def component(self, tiny_qwen_path: Path) -> QwenImageModel:
        spec = _spec()
        return spec.factory(structure_options(spec, _options(tiny_qwen_path)), BuildContext(device="cpu"))

    @pytest.fixture
    def image_size(self) -> tuple[int, int]:
        return (32, 32)


class TestQwenImageModelFullFineTuning(FullFineTuningChecks, TestQwenImageModel):
    """``lora_rank = 0``: no adapters to switch off, and ``save_lora`` writes the whole transformer."""

    @pytest.fixture
    def options(self, tiny_qwen_path: Path) -> dict[str, Any]:
        return _options(tiny_qwen_path, lora_rank=0, lora_alpha=None)

    @pytest.fixture(scope="class")
    def component(self, tiny_qwen_path: Path) -> QwenImageModel:
        spec = _spec()
        options = _options(tiny_qwen_path, lora_rank=0, lora_alpha=None)
        return spec.factory(structure_options(spec, options), BuildContext(device="cpu"))
