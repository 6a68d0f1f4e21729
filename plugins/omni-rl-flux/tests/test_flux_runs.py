"""Whole runs on the tiny pipeline through the CLI: the flux_tiny_jpeg example (Flow-GRPO with the distilled
guidance embedding) for 2 steps and its merged export, DiffusionNFT and online DPO unchanged on FLUX, and the
real-model recipes (flux_dev_pickscore, flux_dev_dance_grpo) validated with ``omni-rl check``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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


@pytest.fixture(scope="module")
def ray_cluster():
    with local_ray():
        yield


def _sets(*items: str) -> list[str]:
    return [a for s in items for a in ("--set", s)]


def _run(out: Path, path: Path, *extra: str) -> list[dict]:
    prompts = EXAMPLES / "prompts" / "objects.txt"
    sets = [f"run.output_dir={out}", f"model.options.path={path}", f"data.train={prompts}", *SMALL, *extra]
    assert main(["run", str(EXAMPLES / "flux_tiny_jpeg.toml"), *_sets(*sets)]) == 0
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def test_tiny_example_runs_and_its_merged_export_loads(tmp_path: Path, tiny_flux_path: Path, ray_cluster) -> None:
    from diffusers import DiffusionPipeline

    rows = _run(tmp_path / "run", tiny_flux_path)
    assert [r["step"] for r in rows] == [1, 2]
    assert all(r["actor/grad_norm"] > 0 for r in rows)
    assert main(["export", str(tmp_path / "run"), "--out", str(tmp_path / "merged"), "--merged"]) == 0
    pipe = DiffusionPipeline.from_pretrained(tmp_path / "merged")
    assert type(pipe).__name__ == "FluxPipeline"


@pytest.mark.parametrize(
    "algorithm",
    [
        ("algorithm.name=diffusion_nft", "loss.name=diffusion_nft", "loss.options={}"),
        ("algorithm.name=dpo", "loss.name=dpo", "loss.options={}"),
    ],
    ids=["diffusion_nft", "dpo"],
)
def test_other_algorithms_run_unchanged(tmp_path: Path, tiny_flux_path: Path, ray_cluster, algorithm) -> None:
    rows = _run(tmp_path / "run", tiny_flux_path, "run.steps=1", *algorithm)
    assert len(rows) == 1 and "actor/grad_norm" in rows[0]


@pytest.mark.parametrize(
    ("example", "settings"),
    [
        ("flux_dev_pickscore.toml", ("lora_rank = 32", "lora_alpha = 64", "steps = 6", "eval_steps = 28")),
        ("flux_dev_dance_grpo.toml", ("lora_rank = 0", "steps = 16", "height = 720", '"dance_grpo"', "lr = 1e-5")),
    ],
)
def test_real_model_examples_pass_check(tiny_flux_path: Path, example: str, settings: tuple[str, ...]) -> None:
    """Documented as not run here (no GPU, no hub): only their configs are validated, against the tiny pipeline."""
    path = EXAMPLES / example
    prompts = EXAMPLES / "prompts" / "objects.txt"
    sets = [f"model.options.path={tiny_flux_path}", f"data.train={prompts}", f"data.val={prompts}"]
    assert main(["check", str(path), *_sets(*sets)]) == 0
    text = path.read_text()
    for setting in (*settings, "guidance = 3.5", "cfg = 1.0", '"bfloat16"', "gradient_checkpointing = true"):
        assert setting in text, setting
