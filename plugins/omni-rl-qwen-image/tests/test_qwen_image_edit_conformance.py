"""omni-rl's model conformance suite on ``qwen_image_edit`` and ``qwen_image_edit_plus`` (tiny pipelines; the Plus
one with ``zero_cond_t``). The suite encodes through ``encode_conditions`` with random sources of two sizes
(64 x 64 and 80 x 64, which the tests' ``condition_max_area`` sizes to 64 x 64 and 64 x 96: condition layouts of
64 and 96 tokens), checks that the velocity follows them, and that joined conditionings of different lengths give
each sample its own velocity. Each class builds its model once (the suite allows it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from omni_rl_pipelines.testing import FullFineTuningChecks
from omni_rl_qwen_image import hooks
from qwen_image_edit_helpers import VAE_AREA, VLM_AREA

from omni_rl.config import structure_options
from omni_rl.context import BuildContext
from omni_rl.specs import ModelSpec
from omni_rl.testing import ModelConformance


def _spec(name: str) -> ModelSpec:
    return next(s for s in hooks.omni_rl_models() if s.name == name)


def _options(path: Path, plus: bool, **changes: Any) -> dict[str, Any]:
    areas = {"condition_max_area": VAE_AREA, **({"vlm_condition_max_area": VLM_AREA} if plus else {})}
    return {"path": str(path), "lora_rank": 4, "lora_alpha": 8.0, **areas, **changes}


def _build(name: str, path: Path, **changes: Any) -> Any:
    spec = _spec(name)
    options = _options(path, name.endswith("plus"), **changes)
    return spec.factory(structure_options(spec, options), BuildContext(device="cpu"))


class TestQwenImageEditModel(ModelConformance):
    name = "qwen_image_edit"

    @pytest.fixture
    def spec(self) -> ModelSpec:
        return _spec(self.name)

    @pytest.fixture
    def options(self, tiny_edit_path: Path) -> dict[str, Any]:
        return _options(tiny_edit_path, False)

    @pytest.fixture(scope="class")
    def component(self, tiny_edit_path: Path) -> Any:
        return _build(self.name, tiny_edit_path)

    @pytest.fixture
    def image_size(self) -> tuple[int, int]:
        return (32, 32)


class TestQwenImageEditPlusModel(TestQwenImageEditModel):
    name = "qwen_image_edit_plus"

    @pytest.fixture
    def options(self, tiny_plus_path: Path) -> dict[str, Any]:
        return _options(tiny_plus_path, True)

    @pytest.fixture(scope="class")
    def component(self, tiny_plus_path: Path) -> Any:
        return _build(self.name, tiny_plus_path)


class TestQwenImageEditPlusFullFineTuning(FullFineTuningChecks, TestQwenImageEditPlusModel):
    """``lora_rank = 0``: no adapters to switch off, and ``save_lora`` writes the whole transformer."""

    @pytest.fixture
    def options(self, tiny_plus_path: Path) -> dict[str, Any]:
        return _options(tiny_plus_path, True, lora_rank=0, lora_alpha=None)

    @pytest.fixture(scope="class")
    def component(self, tiny_plus_path: Path) -> Any:
        return _build(self.name, tiny_plus_path, lora_rank=0, lora_alpha=None)
