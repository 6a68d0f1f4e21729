"""The shipped shapes edit model (omni-rl-shapes-edit): docs/examples/shapes_edit.toml runs 3 shrunk steps on it
through the real loop (Ray, condition images from the task rows, the shapes_edit reward reading the sources),
``omni-rl eval --benchmark shapes_edit`` reproduces its recorded val (a 6-task subset here, all 48 tasks in the
slow test), and its pretraining command is deterministic for a few steps (slow). Gains: docs/benchmarks.md."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from omni_rl.cli import main
from omni_rl.testing.ray import local_ray
from omni_rl.testing.runs import run_config

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytest.importorskip("omni_rl_qwen_image")
pytest.importorskip("omni_rl_shapes_edit")

EXAMPLES = Path(__file__).parents[3] / "docs" / "examples"
#: 3 steps of 2 tasks x 4 images, a 4-task val at the end, nothing saved
SHRINK = (
    "run.steps=3",
    "run.eval_every=3",
    "run.eval_before_training=false",
    "run.save_every=0",
    "log.image_every=0",
    'log.backends=["jsonl"]',
    "data.prompts_per_step=2",
    "data.val_prompts=4",
    "data.val_images_per_prompt=1",
    "rollout.options.group_size=4",
    "rollout.options.batch_size=8",
    "optim.micro_batch=8",
    "optim.mini_batch=8",
    "cluster.cpus_per_worker=1",
)


def _record() -> dict:
    from omni_rl_shapes import pretrained_path
    from omni_rl_shapes.evaluate import read_record

    return read_record(pretrained_path("qwen_image_edit"))


@pytest.fixture(scope="module")
def ray_cluster():
    with local_ray():
        yield


@pytest.mark.parametrize(
    "example",
    ["shapes_edit.toml", pytest.param("shapes_edit_nft.toml", marks=pytest.mark.slow)],  # ~20 s each
)
def test_the_example_runs_three_shrunk_steps(example: str, tmp_path: Path, ray_cluster) -> None:
    rows = run_config(EXAMPLES / example, tmp_path / "run", SHRINK)
    assert [row["step"] for row in rows] == [1, 2, 3]
    assert all(0.0 <= row["reward/mean"] <= 1.0 for row in rows)
    # a step whose groups all score alike has no advantage to follow (no gradient); the others move the LoRA
    assert any((row.get("actor/grad_norm") or 0.0) > 0 for row in rows)
    assert 0.0 <= rows[-1]["val/reward/mean"] <= 1.0


def _eval(tmp_path: Path, limit: int | None) -> float:
    from omni_rl_shapes import pretrained_path
    from omni_rl_shapes.pretraining.edit import EditEval

    evaluation = EditEval()
    words = evaluation.command(str(pretrained_path("qwen_image_edit"))).split()[1:]
    words += ["--out", str(tmp_path / "eval")] + (["--limit", str(limit)] if limit else [])
    assert main(words) == 0
    rows = [json.loads(line) for line in (tmp_path / "eval" / "results.jsonl").read_text().splitlines()]
    return sum(r["score"] for r in rows) / len(rows)


def test_omni_rl_eval_reproduces_the_recorded_subset_val(tmp_path: Path) -> None:
    subset = _record()["val_subset"]
    assert _eval(tmp_path, subset["limit"]) == pytest.approx(subset["score"], abs=1e-6)


@pytest.mark.slow  # 96 edits (~20 s on 2 cores)
def test_omni_rl_eval_reproduces_the_recorded_val(tmp_path: Path) -> None:
    assert _eval(tmp_path, None) == pytest.approx(_record()["val"]["score"], abs=1e-6)


@pytest.mark.slow  # two pretraining runs, each re-measuring val on 96 edits (~1 min)
def test_the_pretraining_command_is_deterministic_for_a_few_steps(tmp_path: Path) -> None:
    import torch
    from omni_rl_shapes.pretraining import edit
    from safetensors.torch import load_file

    argv = ["--steps", "3", "--extra-tasks", "6", "--val-limit", "1", "--eval-from", "3", "--eval-every", "3"]
    argv += ["--target-low", "0", "--target-high", "1", "--warmup-steps", "1"]
    threads = torch.get_num_threads()
    try:
        for name in ("a", "b"):
            assert edit.main([*argv, "--out", str(tmp_path / name)]) == 0
    finally:
        torch.set_num_threads(threads)
    weights = "transformer/diffusion_pytorch_model.safetensors"
    a, b = (load_file(tmp_path / name / weights) for name in ("a", "b"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    records = [json.loads((tmp_path / n / "omni_rl_shapes_pretrain.json").read_text()) for n in ("a", "b")]
    assert records[0]["evals"] == records[1]["evals"] and records[0]["val"] == records[1]["val"]
    assert records[0]["command"].startswith("python -m omni_rl_shapes.pretraining.edit --steps 3")
    shipped = load_file(Path(edit.text_to_image_dir()) / "vae" / "diffusion_pytorch_model.safetensors")
    assert all(
        torch.equal(v, load_file(tmp_path / "a" / "vae/diffusion_pytorch_model.safetensors")[k])
        for k, v in shipped.items()
    )
