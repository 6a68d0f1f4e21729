"""The tiny-pipeline writers every model plugin's builder goes through: atomic publishing, one seed per component,
the tokenizer class recorded for any transformers version, and shape checks that say what to change."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from omni_rl_pipelines.tiny import (
    TINY_MARKER,
    check_vae_widths,
    name_tokenizer_class,
    seeded_components,
    tiny_latent_stats,
    write_tiny_pipeline,
)

from omni_rl.errors import ConfigError


def _writer(text: str):
    def write(out: Path, scratch: Path) -> None:
        assert scratch.is_dir() and out.parent == scratch  # built beside the target, published by a rename
        out.mkdir()
        (out / "model_index.json").write_text(json.dumps({"_class_name": "Toy", "text": text}), encoding="utf-8")

    return write


def test_write_tiny_pipeline_publishes_a_marked_directory_and_refuses_to_overwrite_by_accident(tmp_path: Path) -> None:
    target = tmp_path / "nested" / "tiny"
    marker = {"builder": "tests", "random_weights": True}
    assert (
        write_tiny_pipeline(target, _writer("a"), label="Toy", marker=marker, overwrite=False, exist_ok=False) == target
    )
    assert json.loads((target / TINY_MARKER).read_text()) == marker
    assert [p.name for p in target.parent.iterdir()] == ["tiny"]  # no staging folder left behind
    with pytest.raises(ConfigError, match="cannot write a tiny Toy pipeline") as error:
        write_tiny_pipeline(target, _writer("b"), label="Toy", marker=marker, overwrite=False, exist_ok=False)
    assert "overwrite=True" in (error.value.hint or "")
    write_tiny_pipeline(target, _writer("b"), label="Toy", marker=marker, overwrite=False, exist_ok=True)
    assert json.loads((target / "model_index.json").read_text())["text"] == "a"  # kept, not rebuilt
    write_tiny_pipeline(target, _writer("c"), label="Toy", marker=marker, overwrite=True, exist_ok=False)
    assert json.loads((target / "model_index.json").read_text())["text"] == "c"
    assert sorted(p.name for p in target.parent.iterdir()) == ["tiny"]


def test_a_failed_build_leaves_nothing_behind(tmp_path: Path) -> None:
    def broken(out: Path, scratch: Path) -> None:
        out.mkdir()
        raise RuntimeError("diffusers refused")

    with pytest.raises(RuntimeError, match="diffusers refused"):
        write_tiny_pipeline(tmp_path / "tiny", broken, label="Toy", marker={}, overwrite=False, exist_ok=False)
    assert list(tmp_path.iterdir()) == []


def test_each_component_has_its_own_seed_and_the_callers_rng_is_left_alone() -> None:
    torch.manual_seed(123)
    before = torch.get_rng_state()
    a, b = seeded_components(5, lambda: torch.randn(3), lambda: torch.randn(2))
    assert torch.equal(torch.get_rng_state(), before)
    torch.manual_seed(5 * 8 + 1)
    assert torch.equal(b, torch.randn(2))  # the second component: seed * 8 + 1, whatever the first one drew
    (a_alone,) = seeded_components(5, lambda: torch.randn(3))
    assert torch.equal(a, a_alone)
    _, b_after_a_larger_first = seeded_components(5, lambda: torch.randn(30), lambda: torch.randn(2))
    assert torch.equal(b, b_after_a_larger_first)  # one component's shape leaves the others' weights unchanged


def test_name_tokenizer_class_rewrites_only_that_component(tmp_path: Path) -> None:
    (tmp_path / "model_index.json").write_text(
        json.dumps({"tokenizer": ["transformers", "CLIPTokenizer"], "tokenizer_2": ["transformers", "T5Tokenizer"]})
    )
    name_tokenizer_class(tmp_path, "tokenizer_2", "T5TokenizerFast")
    index = json.loads((tmp_path / "model_index.json").read_text())
    assert index == {"tokenizer": ["transformers", "CLIPTokenizer"], "tokenizer_2": ["transformers", "T5TokenizerFast"]}


def test_vae_widths_must_fit_the_group_norm() -> None:
    check_vae_widths((32, 32), 8, example="x")
    with pytest.raises(ConfigError, match=r"\(24, 32\) must be a multiple of vae_norm_num_groups \(16\)") as error:
        check_vae_widths((24, 32), 16, example="vae_block_out_channels=(32, 32)")
    assert error.value.hint == "e.g. vae_block_out_channels=(32, 32)"
    with pytest.raises(ConfigError):
        check_vae_widths((), 8, example="x")


def test_tiny_latent_stats_are_not_the_identity() -> None:
    mean, std = tiny_latent_stats(16)
    assert len(mean) == len(std) == 16 and min(mean) < 0 < max(mean) and min(std) < 1 < max(std)
