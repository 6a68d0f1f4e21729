"""Whole runs through the CLI: the tiny example (Flow-GRPO with CFG) for 2 steps on a tiny pipeline it builds on
the fly, and its merged export; the real-model recipe checked against a tiny layout; the Turbo-without-KL warning."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from omni_rl_z_image.checks import ZImageTurboWarning

from omni_rl.cli import main
from omni_rl.testing.ray import local_ray

EXAMPLES = Path(__file__).parents[3] / "docs" / "examples"
#: the tiny example shrunk to 2 steps of 2 prompts x 2 images at 32 px, a checkpoint every step
SMALL = (
    "run.steps=2",
    "run.save_every=1",
    "rollout.options.height=32",
    "rollout.options.width=32",
    "rollout.options.group_size=2",
    "rollout.options.batch_size=4",
    "optim.micro_batch=2",
    "optim.mini_batch=4",
    "cluster.cpus_per_worker=1",
)
RECIPE = EXAMPLES / "z_image_flow_grpo.toml"


def _sets(*sets: str) -> list[str]:
    return [a for s in sets for a in ("--set", s)]


def test_tiny_example_runs_and_its_merged_export_loads(tmp_path: Path) -> None:
    from diffusers import DiffusionPipeline

    out, model_path = tmp_path / "run", tmp_path / "models" / "z-image-tiny"  # built on the fly
    sets = [f"run.output_dir={out}", f"model.options.path={model_path}", *SMALL]
    sets.append(f"data.train={EXAMPLES / 'prompts' / 'objects.txt'}")
    with local_ray():
        assert main(["run", str(EXAMPLES / "z_image_tiny.toml"), *_sets(*sets)]) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    assert all(r["actor/grad_norm"] > 0 for r in rows)
    assert (model_path / "model_index.json").is_file()
    assert main(["export", str(out), "--out", str(tmp_path / "merged"), "--merged"]) == 0
    assert type(DiffusionPipeline.from_pretrained(tmp_path / "merged")).__name__ == "ZImagePipeline"


def _check(path: Path, *extra: str) -> list[warnings.WarningMessage]:
    sets = [f"model.options.path={path}", f"data.train={EXAMPLES / 'prompts' / 'objects.txt'}", *extra]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["check", str(RECIPE), *_sets(*sets)]) == 0
    return [w for w in caught if issubclass(w.category, ZImageTurboWarning)]


def test_recipe_passes_check_at_its_published_settings(tiny_z_path: Path) -> None:
    """Documented as not run here (no GPU, no hub): only its config is validated, against the tiny pipeline."""
    assert _check(tiny_z_path) == []
    text = RECIPE.read_text()
    for setting in ("kl_coef = 0.04", "lora_rank = 32", "lora_alpha = 64", "clip_ratio = 1e-4", '"pickscore"'):
        assert setting in text
    assert 'path = "Tongyi-MAI/Z-Image"' in text


def test_turbo_without_kl_warns_naming_the_option(tiny_z_path: Path, tiny_turbo_path: Path) -> None:
    (warning,) = _check(tiny_turbo_path, "loss.options.kl_coef=0")
    assert str(warning.message).endswith("@ $.loss.options.kl_coef")
    assert _check(tiny_turbo_path) == []  # with KL: no warning
    assert _check(tiny_z_path, "loss.options.kl_coef=0") == []  # the base model: no warning
    # a hub id naming Turbo, or the option itself, marks the distilled checkpoint too
    assert len(_check(tiny_z_path, "loss.options.kl_coef=0", "model.options.distilled=true")) == 1


def test_plugins_command_lists_the_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugins", "--components", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    (entry,) = [p for p in listing if p["distribution"] == "omni-rl-z-image"]
    assert entry["status"] == "active"
    assert {"kind": "model", "name": "z_image"}.items() <= entry["components"][0].items()
