"""Whole runs through the CLI for ``qwen_image21``: the tiny example (Flow-GRPO with true CFG) for 2 steps on a tiny
pipeline it builds on the fly, its LoRA loading into QwenImage21Pipeline and its merged export loading back."""

from __future__ import annotations

import json
from pathlib import Path

from qwen_image21_helpers import PROMPTS, load_pipe21, pipe21_sample

from omni_rl.cli import main
from omni_rl.testing.ray import local_ray

EXAMPLES = Path(__file__).parents[3] / "docs" / "examples"
#: the tiny example shrunk to 2 steps of 2 prompts x 2 images at 64 px, a checkpoint every step
SMALL = (
    "run.steps=2",
    "run.save_every=1",
    "rollout.options.group_size=2",
    "rollout.options.batch_size=4",
    "optim.micro_batch=2",
    "optim.mini_batch=4",
    "cluster.cpus_per_worker=1",
)


def test_tiny_example_runs_and_its_lora_and_merged_export_load(tmp_path: Path) -> None:
    from omni_rl_qwen_image.qwen21_prompts import TextProcessor

    out, model_path = tmp_path / "run", tmp_path / "models" / "qwen-image21-tiny"  # built on the fly
    sets = [f"run.output_dir={out}", f"model.options.path={model_path}", *SMALL]
    sets.append(f"data.train={EXAMPLES / 'prompts' / 'objects.txt'}")
    with local_ray():
        assert main(["run", str(EXAMPLES / "qwen_image21_tiny.toml"), *[a for s in sets for a in ("--set", s)]]) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    assert all(r["actor/grad_norm"] > 0 for r in rows)
    # the LoRA the run wrote loads with the pipeline's load_lora_weights and changes its output
    pipe = load_pipe21(model_path)
    before = pipe21_sample(pipe, PROMPTS[1], steps=2, cfg=1.0, seed=0)
    pipe.load_lora_weights(out / "checkpoints" / "step_2")
    after = pipe21_sample(pipe, PROMPTS[1], steps=2, cfg=1.0, seed=0)
    assert (after.int() - before.int()).abs().max() > 0
    assert main(["export", str(out), "--out", str(tmp_path / "merged"), "--merged"]) == 0
    index = json.loads((tmp_path / "merged" / "model_index.json").read_text())
    assert index["_class_name"] == "QwenImage21Pipeline" and index["processor"][1] == "Qwen3VLProcessor"
    merged = load_pipe21(tmp_path / "merged")
    assert type(merged.processor) is TextProcessor
    assert (pipe21_sample(merged, PROMPTS[1], steps=2, cfg=1.0, seed=0).int() - after.int()).abs().max() <= 1
