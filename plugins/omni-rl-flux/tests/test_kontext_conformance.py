"""omni-rl's model conformance suite on ``flux_kontext`` (the session's tiny Kontext pipeline), with LoRA and with
full fine-tuning.

The suite encodes through ``encode_conditions`` with random sources of two sizes (64 x 64 and 80 x 64 px here: 64
and 80 condition tokens), so its batching check joins conditions of different lengths with ``Conditioning.concat``
(right-padded with zeros) and requires each sample's velocity to be the one it gets alone: padding must not take
part in attention. cfg 4.5 in the suite is true CFG on top of the distilled guidance embedding.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kontext_helpers import kontext_spec
from omni_rl_flux.kontext import FluxKontextModel
from omni_rl_pipelines.testing import FullFineTuningChecks

from omni_rl.config import structure_options
from omni_rl.context import BuildContext
from omni_rl.specs import ModelSpec
from omni_rl.testing import ModelConformance


def _options(path: Path, **changes: Any) -> dict[str, Any]:
    """TOML-shaped options: the tiny pipeline, LoRA rank 4 with alpha 8 (a scale other than 1)."""
    return {"path": str(path), "lora_rank": 4, "lora_alpha": 8.0, "negative_prompt": "blurry", **changes}


def _build(path: Path, **changes: Any) -> FluxKontextModel:
    spec = kontext_spec()
    return spec.factory(structure_options(spec, _options(path, **changes)), BuildContext(device="cpu"))


class TestFluxKontextModel(ModelConformance):
    @pytest.fixture
    def spec(self) -> ModelSpec:
        return kontext_spec()

    @pytest.fixture
    def options(self, tiny_kontext_path: Path) -> dict[str, Any]:
        return _options(tiny_kontext_path)

    @pytest.fixture(scope="class")
    def component(self, tiny_kontext_path: Path) -> FluxKontextModel:
        return _build(tiny_kontext_path)

    @pytest.fixture
    def image_size(self) -> tuple[int, int]:
        return (32, 32)


class TestFluxKontextModelFullFineTuning(FullFineTuningChecks, TestFluxKontextModel):
    """``lora_rank = 0``: no adapters to switch off, and ``save_lora`` writes the whole transformer."""

    @pytest.fixture
    def options(self, tiny_kontext_path: Path) -> dict[str, Any]:
        return _options(tiny_kontext_path, lora_rank=0, lora_alpha=None)

    @pytest.fixture(scope="class")
    def component(self, tiny_kontext_path: Path) -> FluxKontextModel:
        return _build(tiny_kontext_path, lora_rank=0, lora_alpha=None)
