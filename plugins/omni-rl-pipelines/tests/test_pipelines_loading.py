"""PipelineKind: a wrong ``path`` ends in a ConfigError that says what to set, before diffusers is asked."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest
from omni_rl_pipelines.loading import PipelineKind

from omni_rl.errors import ConfigError

#: what the toy kind's tiny builder was asked to write (the builder is this module's function)
BUILT: list[Path] = []


def build_toy_pipeline(path: Path, *, exist_ok: bool) -> None:
    BUILT.append(path)
    path.mkdir(parents=True, exist_ok=exist_ok)
    (path / "model_index.json").write_text(json.dumps({"_class_name": "ToyPipeline", "transformer": ["d", "T"]}))


TOY = PipelineKind(
    label="Toy",
    pipeline_class="ToyPipeline",
    class_names=frozenset({"ToyPipeline"}),
    required=("transformer",),
    model_name="toy",
    example="acme/toy",
    tiny_builder=f"{__name__}:build_toy_pipeline",
)


@attrs.frozen
class Options:
    path: str
    build_tiny_if_missing: bool = False
    dtype: str = "float32"


def test_a_pipeline_directory_resolves_to_itself(tmp_path: Path) -> None:
    build_toy_pipeline(tmp_path / "toy", exist_ok=False)
    assert TOY.resolve(Options(str(tmp_path / "toy"))) == str(tmp_path / "toy")


def test_a_missing_path_is_built_when_asked_and_refused_with_a_hint_otherwise(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"Toy pipeline path .* does not exist") as error:
        TOY.resolve(Options(str(tmp_path / "missing")))
    assert "options.path" in (error.value.hint or "") and "build_tiny_if_missing" in (error.value.hint or "")
    BUILT.clear()
    assert TOY.resolve(Options(str(tmp_path / "tiny"), build_tiny_if_missing=True)) == str(tmp_path / "tiny")
    assert [tmp_path / "tiny"] == BUILT
    custom: list[Path] = []
    TOY.resolve(Options(str(tmp_path / "other"), build_tiny_if_missing=True), custom.append)  # a model's own builder
    assert custom == [tmp_path / "other"]


def test_a_hub_id_is_passed_on() -> None:
    assert TOY.resolve(Options("acme/toy-model")) == "acme/toy-model"


def test_a_kind_without_a_tiny_builder_says_so(tmp_path: Path) -> None:
    kind = attrs.evolve(TOY, tiny_builder=None)
    with pytest.raises(ConfigError, match="no tiny Toy pipeline"):
        kind.resolve(Options(str(tmp_path / "tiny"), build_tiny_if_missing=True))


@pytest.mark.parametrize(
    ("index", "message"),
    [
        (None, r"not a diffusers pipeline directory \(no model_index\.json\)"),
        ({"_class_name": "OtherPipeline"}, "holds a OtherPipeline, not a ToyPipeline"),
        ({"_class_name": "ToyPipeline", "transformer": [None, None]}, "lacks the Toy components transformer"),
    ],
)
def test_directories_that_are_not_this_pipeline_are_config_errors(
    tmp_path: Path, index: dict | None, message: str
) -> None:
    if index is not None:
        (tmp_path / "model_index.json").write_text(json.dumps(index))
    with pytest.raises(ConfigError, match=message):
        TOY.resolve(Options(str(tmp_path)))
