"""The package ships the motion model where omni_rl_shapes and ``package:`` paths look for it, under 20 MB, in
diffusers' ``WanPipeline`` layout. What the model does (its record, loading, val reward, the example) is tested in
omni-rl-shapes' tests/test_motion_model.py."""

from __future__ import annotations

import json
from pathlib import Path

import omni_rl_shapes
import omni_rl_shapes_motion

from omni_rl.package_paths import package_path

PACKAGE = Path(omni_rl_shapes_motion.__file__).parent
MAX_PACKAGE_BYTES = 20 * 2**20


def test_the_package_is_at_most_20_mb() -> None:
    size = sum(p.stat().st_size for p in PACKAGE.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    assert size <= MAX_PACKAGE_BYTES


def test_omni_rl_shapes_and_package_paths_find_the_same_directory() -> None:
    spec = omni_rl_shapes.pretrained_package_path("wan")
    assert spec == f"package:omni_rl_shapes_motion:{omni_rl_shapes_motion.MODEL_DIR}"
    assert package_path(spec).resolve() == omni_rl_shapes.pretrained_path("wan").resolve()


def test_it_is_a_wan_pipeline_directory() -> None:
    path = omni_rl_shapes.pretrained_path("wan")
    index = json.loads((path / "model_index.json").read_text())
    assert index["_class_name"] == "WanPipeline"
    for component in ("transformer", "vae", "text_encoder"):
        assert any((path / component).glob("*.safetensors")), component
