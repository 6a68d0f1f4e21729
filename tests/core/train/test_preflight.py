"""``omni_rl.train.preflight``: what ``omni-rl check`` finds without loading weights (toy components, no Ray)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest
from core_toys import TOY_CONFIG, ToyPlugin, ToyReward

from omni_rl import RewardSpec, hookimpl
from omni_rl.config import load_config
from omni_rl.config.schema import ResolvedConfig
from omni_rl.errors import ConfigError
from omni_rl.testing import InlinePlugin, make_registry
from omni_rl.train.preflight import preflight, preflight_problems

KEY = "OMNI_RL_TEST_PREFLIGHT_KEY"


@attrs.frozen(kw_only=True)
class KeyedRewardConfig:
    scale: float = 1.0
    #: the name of the variable holding an API key, as omni-rl-rewards-remote's rewards declare it
    api_key_env: str = ""


class KeyedRewardPlugin:
    @hookimpl
    def omni_rl_reward_models(self) -> list[RewardSpec]:
        return [RewardSpec(name="keyed", factory=lambda c, ctx: ToyReward(c), config=KeyedRewardConfig)]


@pytest.fixture
def load(write_config: Callable[..., Path], tmp_path: Path) -> Callable[..., ResolvedConfig]:
    registry = make_registry(InlinePlugin(ToyPlugin(), "toys", "1"), InlinePlugin(KeyedRewardPlugin(), "keyed", "1"))
    registry.validate()
    text = TOY_CONFIG + f'\n[[reward]]\nname = "keyed"\noptions = {{ api_key_env = "{KEY}" }}\n'
    path = write_config(text)

    def loader(*sets: str) -> ResolvedConfig:
        return load_config(path, [f"run.output_dir={tmp_path / 'run'}", *sets], registry=registry)

    return loader


@pytest.fixture
def pipeline(tmp_path: Path) -> Path:
    directory = tmp_path / "pipeline"
    directory.mkdir()
    (directory / "model_index.json").write_text(json.dumps({"_class_name": "ToyPipeline"}))
    return directory


def test_a_complete_setup_has_no_problems(load, pipeline: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY, "secret")
    assert preflight_problems(load(f"model.options.path={pipeline}")) == []


def test_a_missing_model_path(load, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY, "secret")
    problems = preflight_problems(load(f"model.options.path={tmp_path / 'nowhere'}"))
    assert len(problems) == 1
    assert "does not exist" in problems[0] and problems[0].endswith("@ $.model.options.path")


def test_an_empty_model_directory(load, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY, "secret")
    (tmp_path / "empty").mkdir()
    problems = preflight_problems(load(f"model.options.path={tmp_path / 'empty'}"))
    assert len(problems) == 1 and "no model_index.json" in problems[0]


def test_a_hub_id_is_left_to_the_loader(load, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(KEY, "secret")
    monkeypatch.chdir(tmp_path)
    assert preflight_problems(load("model.options.path=stabilityai/stable-diffusion-3.5-medium")) == []


def test_an_unset_key_variable_is_named_never_its_value(load, pipeline: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY, raising=False)
    problems = preflight_problems(load(f"model.options.path={pipeline}"))
    assert problems == [
        f"reward 'keyed' reads the environment variable {KEY}, which is not set @ $.reward[1].options.api_key_env"
    ]


def test_an_output_dir_under_a_file(load, pipeline: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY, "secret")
    (tmp_path / "a_file").write_text("x")
    problems = preflight_problems(
        load(f"model.options.path={pipeline}", f"run.output_dir={tmp_path / 'a_file' / 'run'}")
    )
    assert len(problems) == 1 and problems[0].endswith("@ $.run.output_dir")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_an_unwritable_output_dir(load, pipeline: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY, "secret")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    problems = preflight_problems(load(f"model.options.path={pipeline}", f"run.output_dir={locked / 'run'}"))
    assert len(problems) == 1 and "permission denied" in problems[0]


def test_a_missing_resume_path(load, pipeline: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY, "secret")
    problems = preflight_problems(load(f"model.options.path={pipeline}", f"run.resume={tmp_path / 'step_9'}"))
    assert len(problems) == 1 and problems[0].endswith("@ $.run.resume")


def test_every_problem_in_one_error(load, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY, raising=False)
    config = load(f"model.options.path={tmp_path / 'nowhere'}", f"run.resume={tmp_path / 'step_9'}")
    with pytest.raises(ConfigError) as info:
        preflight(config, "config.toml")
    assert info.value.exit_code == 2
    assert "(3 problems)" in info.value.message


@pytest.mark.parametrize("value", ["sk-one\r\nsk-two", "sk-a b", "sk-\x1b[0mx", "sk-caf\u00e9"])
def test_a_key_with_a_control_character_or_space_inside_is_refused_by_name(
    load, pipeline: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """Issue 48, N1: such a value cannot be a bearer token (http.client refuses it and quotes the header, key and
    all); refused before the run, naming the variable, never the value."""
    monkeypatch.setenv(KEY, value)
    (problem,) = preflight_problems(load(f"model.options.path={pipeline}"))
    assert problem.startswith(f"reward 'keyed': the environment variable {KEY} holds a control character")
    assert problem.endswith("@ $.reward[1].options.api_key_env") and "sk-" not in problem


def test_surrounding_whitespace_of_a_key_is_dropped_as_the_rewards_do(
    load, pipeline: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY, "sk-from-a-kubernetes-secret\n")  # `echo ... | base64` writes the newline
    assert preflight_problems(load(f"model.options.path={pipeline}")) == []
    monkeypatch.setenv(KEY, " \n")
    (problem,) = preflight_problems(load(f"model.options.path={pipeline}"))
    assert "which is not set" in problem
