"""The package ships the edit model where omni_rl_shapes and ``package:`` paths look for it, under 20 MB, in
diffusers' ``QwenImageEditPipeline`` layout, with the record of how it was made. What the model does (its val
reproduced by ``omni-rl eval``, the example) is tested in tests/test_shapes_edit_model.py."""

from __future__ import annotations

import json
from pathlib import Path

import omni_rl_shapes
import omni_rl_shapes_edit

from omni_rl.package_paths import package_path

PACKAGE = Path(omni_rl_shapes_edit.__file__).parent
MAX_PACKAGE_BYTES = 20 * 2**20


def test_the_package_is_at_most_20_mb() -> None:
    size = sum(p.stat().st_size for p in PACKAGE.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    assert size <= MAX_PACKAGE_BYTES


def test_omni_rl_shapes_and_package_paths_find_the_same_directory() -> None:
    spec = omni_rl_shapes.pretrained_package_path("qwen_image_edit")
    assert spec == f"package:omni_rl_shapes_edit:{omni_rl_shapes_edit.MODEL_DIR}"
    assert package_path(spec).resolve() == omni_rl_shapes.pretrained_path("qwen_image_edit").resolve()


def test_it_is_a_qwen_image_edit_pipeline_directory_with_its_record() -> None:
    path = omni_rl_shapes.pretrained_path("qwen_image_edit")
    index = json.loads((path / "model_index.json").read_text())
    assert index["_class_name"] == "QwenImageEditPipeline"
    for component in ("transformer", "vae", "text_encoder"):
        assert any((path / component).glob("*.safetensors")), component
    assert (path / "processor" / "preprocessor_config.json").is_file()
    record = json.loads((path / "omni_rl_shapes_pretrain.json").read_text())
    assert record["command"].startswith("python -m omni_rl_shapes.pretraining.edit ")
    assert 0.3 <= record["val"]["score"] <= 0.6  # the required band of the base model's val
