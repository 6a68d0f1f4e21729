"""omni-rl's conformance suites on the ``qwen_image21`` model (the session's tiny pipeline), LoRA and full
fine-tuning. The suite's batching check holds because samples go to the transformer grouped by prompt length,
unpadded (omni_rl_qwen_image.qwen21_model)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from omni_rl_pipelines.testing import FullFineTuningChecks
from omni_rl_qwen_image import hooks
from omni_rl_qwen_image.qwen21_model import QwenImage21Model

from omni_rl.config import structure_options
from omni_rl.context import BuildContext
from omni_rl.specs import ModelSpec
from omni_rl.testing import ModelConformance


def _spec() -> ModelSpec:
    return next(s for s in hooks.omni_rl_models() if s.name == "qwen_image21")


def _options(path: Path, **changes: Any) -> dict[str, Any]:
    """TOML-shaped options: the tiny pipeline, LoRA rank 4 with alpha 8 (a scale other than 1)."""
    return {"path": str(path), "lora_rank": 4, "lora_alpha": 8.0, **changes}


class TestQwenImage21Model(ModelConformance):
    @pytest.fixture
    def spec(self) -> ModelSpec:
        return _spec()

    @pytest.fixture
    def options(self, tiny_q21_path: Path) -> dict[str, Any]:
        return _options(tiny_q21_path)

    @pytest.fixture(scope="class")
    def component(self, tiny_q21_path: Path) -> QwenImage21Model:
        spec = _spec()
        return spec.factory(structure_options(spec, _options(tiny_q21_path)), BuildContext(device="cpu"))

    @pytest.fixture
    def image_size(self) -> tuple[int, int]:
        return (64, 64)


class TestQwenImage21ModelFullFineTuning(FullFineTuningChecks, TestQwenImage21Model):
    """``lora_rank = 0``: no adapters to switch off, and ``save_lora`` writes the whole transformer."""

    @pytest.fixture
    def options(self, tiny_q21_path: Path) -> dict[str, Any]:
        return _options(tiny_q21_path, lora_rank=0, lora_alpha=None)

    @pytest.fixture(scope="class")
    def component(self, tiny_q21_path: Path) -> QwenImage21Model:
        spec = _spec()
        options = _options(tiny_q21_path, lora_rank=0, lora_alpha=None)
        return spec.factory(structure_options(spec, options), BuildContext(device="cpu"))
