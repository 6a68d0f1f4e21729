"""omni-rl's conformance suites on the ``wan`` model (both layouts of the session's tiny pipelines) and its hooks
module. Each class builds its model once (loading is the slow part), which the suite allows: its tests set the
LoRA weights they depend on themselves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from omni_rl_pipelines.testing import FullFineTuningChecks
from omni_rl_wan import hooks
from omni_rl_wan.model import WanModel

from omni_rl.config import structure_options
from omni_rl.context import BuildContext
from omni_rl.specs import ModelSpec
from omni_rl.testing import ModelConformance, PluginConformance


def _spec() -> ModelSpec:
    (spec,) = [s for s in hooks.omni_rl_models() if s.name == "wan"]
    return spec


def _options(path: Path, **changes: Any) -> dict[str, Any]:
    """TOML-shaped options: the tiny pipeline, LoRA rank 4 with alpha 8 (a scale other than 1)."""
    return {"path": str(path), "lora_rank": 4, "lora_alpha": 8.0, **changes}


def _build(options: dict[str, Any]) -> WanModel:
    spec = _spec()
    return spec.factory(structure_options(spec, options), BuildContext(device="cpu"))


class TestWanPlugin(PluginConformance):
    @pytest.fixture
    def hooks_module(self) -> str:
        return "omni_rl_wan.hooks"


class TestWanModel(ModelConformance):
    @pytest.fixture
    def spec(self) -> ModelSpec:
        return _spec()

    @pytest.fixture
    def options(self, tiny_wan_path: Path) -> dict[str, Any]:
        return _options(tiny_wan_path)

    @pytest.fixture(scope="class")
    def component(self, tiny_wan_path: Path) -> WanModel:
        return _build(_options(tiny_wan_path))

    @pytest.fixture
    def image_size(self) -> tuple[int, int]:
        return (32, 32)


class TestWan22Model(TestWanModel):
    """Two experts: the suite's views, velocities and LoRA round trip act on both."""

    @pytest.fixture
    def options(self, tiny_wan22_path: Path) -> dict[str, Any]:
        return _options(tiny_wan22_path)

    @pytest.fixture(scope="class")
    def component(self, tiny_wan22_path: Path) -> WanModel:
        return _build(_options(tiny_wan22_path))


class TestWanModelFullFineTuning(FullFineTuningChecks, TestWanModel):
    """``lora_rank = 0`` (one transformer): no adapters to switch off; ``save_lora`` writes the whole transformer."""

    @pytest.fixture
    def options(self, tiny_wan_path: Path) -> dict[str, Any]:
        return _options(tiny_wan_path, lora_rank=0, lora_alpha=None)

    @pytest.fixture(scope="class")
    def component(self, tiny_wan_path: Path) -> WanModel:
        return _build(_options(tiny_wan_path, lora_rank=0, lora_alpha=None))
