"""``omni-rl eval PIPELINE_DIR`` picks the model by the directory's ``model_index.json`` class: every pipeline class
of the first-party model plugins maps to a model an installed plugin provides."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omni_rl.cli import main
from omni_rl.evaluation.generator import MODEL_BY_PIPELINE, default_tables

NEW_CLASSES = {
    "Flux2KleinPipeline": "flux2_klein",
    "ZImagePipeline": "z_image",
    "QwenImage21Pipeline": "qwen_image21",
    "FluxKontextPipeline": "flux_kontext",
    "QwenImageEditPipeline": "qwen_image_edit",
    "QwenImageEditPlusPipeline": "qwen_image_edit_plus",
}


@pytest.mark.parametrize("pipeline_class", sorted(NEW_CLASSES))
def test_a_pipeline_directory_gets_its_model(tmp_path: Path, pipeline_class: str) -> None:
    (tmp_path / "model_index.json").write_text(json.dumps({"_class_name": pipeline_class}), encoding="utf-8")
    tables = default_tables(tmp_path)
    assert tables["model"] == {"name": NEW_CLASSES[pipeline_class], "options": {"path": str(tmp_path)}}


def test_every_mapped_model_is_provided_by_an_installed_plugin(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugins", "--components", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    models = {c["name"] for p in listing for c in p.get("components", []) if c.get("kind") == "model"}
    assert set(MODEL_BY_PIPELINE.values()) <= models
