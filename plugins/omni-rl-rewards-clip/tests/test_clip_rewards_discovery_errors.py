"""Discovery (`omni-rl plugins --components`; the light hooks import is in the conformance module), device choice,
and the errors for missing weights, which name the option by its config path."""

from __future__ import annotations

import json
from pathlib import Path

import huggingface_hub.constants
import numpy as np
import pytest
from clip_tiny_models import build_reward as build
from omni_rl_rewards_clip.loading import pick_device

from omni_rl.cli import main
from omni_rl.context import BuildContext
from omni_rl.errors import ConfigError

NAMES = {"pickscore", "clip_score", "hpsv2", "aesthetic"}


def test_plugins_command_lists_the_rewards(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugins", "--components", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    text = json.dumps(listing)
    assert "omni-rl-rewards-clip" in text
    for name in NAMES:
        assert f'"{name}"' in text


def test_default_options_build_without_loading(monkeypatch: pytest.MonkeyPatch) -> None:
    """Building with the published hub ids touches no network and no disk: weights load on the first call."""
    for name in NAMES:
        reward = build(name)
        assert reward._loaded is None


@pytest.mark.parametrize(
    ("name", "option"),
    [("pickscore", "processor"), ("clip_score", "model"), ("hpsv2", "processor"), ("aesthetic", "model")],
)
def test_missing_weights_offline_name_the_option(
    name: str, option: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    reward = build(name)
    with pytest.raises(ConfigError) as caught:
        reward(np.zeros((1, 32, 32, 3), dtype=np.uint8), ["a"], [{}])
    message = str(caught.value)
    assert f"$.reward[].options.{option}" in message
    assert "hf download" in caught.value.hint and f"options.{option}" in caught.value.hint


@pytest.mark.parametrize(("name", "option"), [("hpsv2", "model"), ("aesthetic", "predictor")])
def test_missing_weight_file_offline_names_the_option(
    name: str,
    option: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    tiny_clip_dir: Path,
    tiny_processor_dir: Path,
) -> None:
    """The CLIP parts are local; the checkpoint file is a hub id that is not cached."""
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    local = {"hpsv2": {"processor": str(tiny_processor_dir)}, "aesthetic": {"model": str(tiny_clip_dir)}}
    with pytest.raises(ConfigError, match=rf"options\.{option}"):
        build(name, local[name])(np.zeros((1, 32, 32, 3), dtype=np.uint8), ["a"], [{}])


def test_a_local_path_that_does_not_exist_fails_at_build_time(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"options\.model"):
        build("clip_score", {"model": str(tmp_path / "no" / "such" / "dir")})


def test_a_directory_without_the_checkpoint_file(tmp_path: Path, tiny_processor_dir: Path) -> None:
    reward = build("hpsv2", {"model": str(tmp_path), "processor": str(tiny_processor_dir)})
    with pytest.raises(ConfigError, match=r"HPS_v2\.1_compressed\.pt"):
        reward(np.zeros((1, 32, 32, 3), dtype=np.uint8), ["a"], [{}])


def test_device_choice() -> None:
    assert pick_device("cpu", "cuda:0") == "cpu"
    assert pick_device("auto", "cuda:1") == "cuda:1"
    import torch

    assert pick_device("auto", "cpu") == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ConfigError, match="device"):
        build("clip_score", {"device": "gpu0"})


def test_errors_name_the_section_the_reward_was_built_from(tmp_path: Path) -> None:
    """A run builds each reward with its section's config path in the context (an [[eval_reward]] here)."""
    ctx = BuildContext(section="$.eval_reward[1]")
    with pytest.raises(ConfigError, match=r"\$\.eval_reward\[1\]\.options\.model") as caught:
        build("clip_score", {"model": str(tmp_path / "no" / "such" / "dir")}, ctx)
    assert "$.eval_reward[1].options.model" in caught.value.hint
