"""omni-rl's conformance suites on the ``flux2_klein`` model (the session's tiny base pipeline, CFG 4.5 in the
suite) and its hooks module, with LoRA and with full fine-tuning."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from flux2_helpers import SEQ
from omni_rl_flux2 import hooks
from omni_rl_flux2.model import Flux2KleinModel
from omni_rl_pipelines.testing import FullFineTuningChecks

from omni_rl.config import structure_options
from omni_rl.context import BuildContext
from omni_rl.specs import ModelSpec
from omni_rl.testing import ModelConformance, PluginConformance


def _spec() -> ModelSpec:
    (spec,) = [s for s in hooks.omni_rl_models() if s.name == "flux2_klein"]
    return spec


def _options(path: Path, **changes: Any) -> dict[str, Any]:
    """TOML-shaped options: the tiny pipeline, LoRA rank 4 with alpha 8 (a scale other than 1)."""
    return {
        "path": str(path),
        "lora_rank": 4,
        "lora_alpha": 8.0,
        "negative_prompt": "blurry",
        "max_sequence_length": SEQ,
        **changes,
    }


class TestFlux2Plugin(PluginConformance):
    @pytest.fixture
    def hooks_module(self) -> str:
        return "omni_rl_flux2.hooks"


class TestFlux2KleinModel(ModelConformance):
    @pytest.fixture
    def spec(self) -> ModelSpec:
        return _spec()

    @pytest.fixture
    def options(self, tiny_base_path: Path) -> dict[str, Any]:
        return _options(tiny_base_path)

    @pytest.fixture(scope="class")
    def component(self, tiny_base_path: Path) -> Flux2KleinModel:
        spec = _spec()
        return spec.factory(structure_options(spec, _options(tiny_base_path)), BuildContext(device="cpu"))

    @pytest.fixture
    def image_size(self) -> tuple[int, int]:
        return (32, 32)


class TestFlux2KleinModelFullFineTuning(FullFineTuningChecks, TestFlux2KleinModel):
    """``lora_rank = 0``: no adapters to switch off, and ``save_lora`` writes the whole transformer."""

    @pytest.fixture
    def options(self, tiny_base_path: Path) -> dict[str, Any]:
        return _options(tiny_base_path, lora_rank=0, lora_alpha=None)

    @pytest.fixture(scope="class")
    def component(self, tiny_base_path: Path) -> Flux2KleinModel:
        spec = _spec()
        options = _options(tiny_base_path, lora_rank=0, lora_alpha=None)
        return spec.factory(structure_options(spec, options), BuildContext(device="cpu"))
