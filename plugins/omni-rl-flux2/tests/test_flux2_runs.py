"""Whole runs through the CLI: the flux2_klein_tiny example (Flow-GRPO with CFG on a tiny base pipeline built on
the fly by build_tiny_if_missing) for 2 steps, and the FLUX.2-klein-base-4B recipe validated with ``omni-rl check``."""

from __future__ import annotations

import json
from pathlib import Path

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


def _sets(*items: str) -> list[str]:
    return [a for s in items for a in ("--set", s)]


def test_tiny_example_runs_two_steps_on_a_pipeline_it_builds(tmp_path: Path) -> None:
    out, path = tmp_path / "run", tmp_path / "models" / "klein-tiny"
    prompts = EXAMPLES / "prompts" / "objects.txt"
    sets = [f"run.output_dir={out}", f"model.options.path={path}", f"data.train={prompts}", *SMALL]
    with local_ray():
        assert main(["run", str(EXAMPLES / "flux2_klein_tiny.toml"), *_sets(*sets)]) == 0
    assert (path / "model_index.json").is_file()  # written by build_tiny_if_missing
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    assert all(r["actor/grad_norm"] > 0 for r in rows)


def test_base_4b_recipe_passes_check(tiny_base_path: Path) -> None:
    """Documented as not run here (no GPU, no hub): only its config is validated, against the tiny pipeline."""
    path = EXAMPLES / "flux2_klein_base_4b_flow_grpo.toml"
    prompts = EXAMPLES / "prompts" / "objects.txt"
    sets = [f"model.options.path={tiny_base_path}", f"data.train={prompts}", f"data.val={prompts}"]
    assert main(["check", str(path), *_sets(*sets)]) == 0
    text = path.read_text()
    for setting in ("FLUX.2-klein-base-4B", "clip_ratio = 1e-5", '"pickscore"', "lora_rank = 32", "cfg = 4.0"):
        assert setting in text, setting
