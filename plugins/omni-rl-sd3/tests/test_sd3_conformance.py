"""omni-rl's conformance suites run on the ``sd3`` model (a tiny random pipeline) and on the hooks module.

The pipeline is conftest's session one (``tiny_sd3_path``); each class loads its model once (loading is the
slow part), which the model suite allows: its tests set the LoRA weights they depend on themselves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from omni_rl_pipelines.testing import FullFineTuningChecks
from omni_rl_sd3 import hooks
from omni_rl_sd3.model import SD3Model

from omni_rl.config import structure_options
from omni_rl.context import BuildContext
from omni_rl.specs import ModelSpec
from omni_rl.testing import ModelConformance, PluginConformance

#: 32x32 px is 16x16 latents with the tiny pipeline's 2x VAE: half its native size, a quarter of the tokens
IMAGE_SIZE = (32, 32)


def _spec() -> ModelSpec:
    (spec,) = hooks.omni_rl_models()
    return spec


def _options(path: Path, **changes: Any) -> dict[str, Any]:
    """TOML-shaped options: the tiny pipeline, LoRA rank 4 with alpha 8 (a scale other than 1)."""
    return {"path": str(path), "lora_rank": 4, "lora_alpha": 8.0, **changes}


class TestSD3Plugin(PluginConformance):
    @pytest.fixture
    def hooks_module(self) -> str:
        return "omni_rl_sd3.hooks"


class TestSD3Model(ModelConformance):
    @pytest.fixture
    def spec(self) -> ModelSpec:
        return _spec()

    @pytest.fixture
    def options(self, tiny_sd3_path: Path) -> dict[str, Any]:
        return _options(tiny_sd3_path)

    @pytest.fixture(scope="class")
    def component(self, tiny_sd3_path: Path) -> SD3Model:
        """Built once for the class, through the plugin's factory as a run builds it."""
        spec = _spec()
        return spec.factory(structure_options(spec, _options(tiny_sd3_path)), BuildContext(device="cpu"))

    @pytest.fixture
    def image_size(self) -> tuple[int, int]:
        return IMAGE_SIZE


class TestSD3ModelFullFineTuning(FullFineTuningChecks, TestSD3Model):
    """``lora_rank = 0`` trains the whole transformer: no adapters to switch off, and ``save_lora`` writes the
    transformer, not a LoRA file. The two suite tests that assume LoRA are replaced by checks of that
    documented behaviour; every other check of the suite applies unchanged."""

    @pytest.fixture
    def options(self, tiny_sd3_path: Path) -> dict[str, Any]:
        return _options(tiny_sd3_path, lora_rank=0, lora_alpha=None)

    @pytest.fixture(scope="class")
    def component(self, tiny_sd3_path: Path) -> SD3Model:
        spec = _spec()
        options = _options(tiny_sd3_path, lora_rank=0, lora_alpha=None)
        return spec.factory(structure_options(spec, options), BuildContext(device="cpu"))
