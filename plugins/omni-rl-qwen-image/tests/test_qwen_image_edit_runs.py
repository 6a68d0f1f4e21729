"""Whole edit runs through the CLI: docs/examples/qwen_image_edit_tiny.toml (Flow-GRPO, true CFG, edit rows whose
sources have three condition sizes, the tiny pipeline built on the fly) for 2 steps, its sample grid (each source
beside its result), the LoRA the run writes loaded by ``QwenImageEditPipeline.load_lora_weights``; the same example
on ``qwen_image_edit_plus`` with rows of one and two images; and the Qwen-Image-Edit-2511 recipe validated with
``omni-rl check``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from qwen_image_edit_helpers import load_pipe, pipe_output
from safetensors.torch import load_file

from omni_rl.cli import main
from omni_rl.reporting.image_grids import beside_sources
from omni_rl.testing.ray import local_ray

EXAMPLES = Path(__file__).parents[3] / "docs" / "examples"
DATA = EXAMPLES / "data" / "qwen_image_edit"
#: the rollout size of these runs: 10x10 latents (5x5 tokens), so a grid cell (source, then result) is 80 px wide
SIZE = 40
SMALL = (
    "run.steps=2",
    "run.save_every=1",
    f"rollout.options.height={SIZE}",
    f"rollout.options.width={SIZE}",
    "rollout.options.group_size=2",
    "rollout.options.batch_size=4",
    "optim.micro_batch=2",
    "optim.mini_batch=4",
    "cluster.cpus_per_worker=1",
    "log.image_every=1",
)


@pytest.fixture(scope="module")
def ray_cluster():
    with local_ray():
        yield


def _sets(*items: str) -> list[str]:
    return [a for s in items for a in ("--set", s)]


def _run(out: Path, *extra: str) -> list[dict]:
    """The example as shipped (its tiny pipeline written on first use under ``out``), shrunk to :data:`SMALL`."""
    sets = [f"run.output_dir={out}", f"model.options.path={out.parent / 'tiny-edit'}", *SMALL, *extra]
    assert main(["run", str(EXAMPLES / "qwen_image_edit_tiny.toml"), *_sets(*sets)]) == 0
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory, ray_cluster) -> tuple[Path, list]:
    out = tmp_path_factory.mktemp("qwen-edit-run") / "run"
    return out, _run(out, f"data.train={DATA / 'edits.jsonl'}")


def _sources() -> list[np.ndarray]:
    return [np.asarray(Image.open(p).convert("RGB")) for p in sorted((DATA / "sources").glob("*.png"))]


def _finds_a_source_panel(grid: np.ndarray, panels: int) -> bool:
    """Some SIZE x SIZE block of the grid's first column is one of the sources fitted as the grid fits it."""
    fitted = [beside_sources(np.zeros((1, SIZE, SIZE, 3), np.uint8), [[s] * panels])[0, :, :SIZE] for s in _sources()]
    for top in range(0, grid.shape[0] - SIZE):
        block = grid[top : top + SIZE, :SIZE].astype(int)
        if any(np.abs(block - f.astype(int)).max() == 0 for f in fitted):
            return True
    return False


def test_tiny_example_runs_two_steps_and_builds_its_pipeline(tiny_run) -> None:
    out, rows = tiny_run
    assert [r["step"] for r in rows] == [1, 2]
    assert all(r["actor/grad_norm"] > 0 for r in rows)
    assert all(r["reward/std"] > 0 for r in rows)  # JPEG compressibility varies on the noise
    assert (out.parent / "tiny-edit" / "model_index.json").is_file()  # build_tiny_if_missing wrote it


def test_the_sample_grid_shows_each_source_beside_its_result(tiny_run) -> None:
    """Two columns (the group size) of 80 px cells: the source panel, then the 40 px result."""
    out, _ = tiny_run
    grid = np.asarray(Image.open(out / "samples_step_1.png").convert("RGB"))
    assert grid.shape[1] == 2 * 2 * SIZE
    assert _finds_a_source_panel(grid, panels=1)


def test_the_lora_the_run_writes_loads_with_the_pipeline(tiny_run, tmp_path: Path) -> None:
    out, _ = tiny_run
    assert main(["export", str(out), "--out", str(tmp_path / "lora")]) == 0
    assert (tmp_path / "lora" / "pytorch_lora_weights.safetensors").is_file()
    source = np.asarray(Image.open(DATA / "sources" / "red_circle.png").convert("RGB"))
    pipe = load_pipe(out.parent / "tiny-edit")
    base, _ = pipe_output(pipe, "make the red circle blue", (source,), steps=4, cfg=4.0, seed=0)
    pipe.load_lora_weights(tmp_path / "lora")
    tuned, _ = pipe_output(pipe, "make the red circle blue", (source,), steps=4, cfg=4.0, seed=0)
    assert not torch.allclose(base, tuned, atol=1e-5)


def _lora(run: Path, step: int) -> dict[str, torch.Tensor]:
    return load_file(str(run / "checkpoints" / f"step_{step}" / "worker_0" / "trainable.safetensors"))


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["ddp", "fsdp2"])
def test_two_workers_match_one(tiny_run, tmp_path: Path, strategy: str) -> None:
    """As the text-to-image models (tests/integration/test_model_workers.py): the same rewards and gradient norms,
    and the same LoRA after every update, with the edit groups (and their conditions) split over two workers;
    FSDP2 with each transformer block one unit."""
    one_run, one = tiny_run
    (tmp_path / "tiny-edit").symlink_to(one_run.parent / "tiny-edit")  # the same tiny pipeline
    extra = (
        "cluster.workers=2",
        f"cluster.strategy={strategy}",
        "log.image_every=0",
        f"data.train={DATA / 'edits.jsonl'}",
    )
    two = _run(tmp_path / "two", *extra)
    assert len(one) == len(two) == 2
    for a, b in zip(one, two, strict=True):
        assert a["reward/mean"] == b["reward/mean"] and a["reward/std"] == b["reward/std"]
        assert abs(a["actor/grad_norm"] - b["actor/grad_norm"]) <= 1e-5 * abs(a["actor/grad_norm"])
    for step in (1, 2):  # LoRA B starts at 0: the summation order moves near-zero entries by ~1e-5 relative
        expected, got = _lora(one_run, step), _lora(tmp_path / "two", step)
        assert got.keys() == expected.keys()
        for name, want in expected.items():
            error = torch.linalg.vector_norm(got[name] - want) / max(float(torch.linalg.vector_norm(want)), 1e-12)
            assert error < 1e-4, (step, name, float(error))


def test_the_plus_model_runs_rows_of_one_and_two_images(tmp_path: Path, ray_cluster) -> None:
    out = tmp_path / "run"
    rows = _run(out, "model.name=qwen_image_edit_plus", f"data.train={DATA / 'edits_plus.jsonl'}", "run.steps=1")
    assert len(rows) == 1 and rows[0]["actor/grad_norm"] > 0
    marker = json.loads((out.parent / "tiny-edit" / "omni_rl_tiny.json").read_text())
    assert marker["plus"] and marker["zero_cond_t"]
    grid = np.asarray(Image.open(out / "samples_step_1.png").convert("RGB"))
    assert grid.shape[1] == 2 * 3 * SIZE  # two source panels (black for one-image rows), then the result


def test_the_2511_recipe_passes_check(tiny_plus_path: Path) -> None:
    """Documented as not run here (no GPU, no hub): the config is validated against the tiny Plus pipeline and the
    shipped edit rows, and its text is checked to hold verl-omni's settings."""
    path = EXAMPLES / "qwen_image_edit_2511_flow_grpo.toml"
    assert main(["check", str(path), *_sets(f"model.options.path={tiny_plus_path}")]) == 0
    text = path.read_text()
    settings = (
        'name = "qwen_image_edit_plus"',
        '"Qwen/Qwen-Image-Edit-2511"',
        "lora_rank = 64",
        "lora_alpha = 128",
        "lr = 3e-4",
        "weight_decay = 1e-4",
        "clip_ratio = 1e-4",
        "global_std = false",
        "group_size = 16",
        "prompts_per_step = 32",
        "height = 512",
        "steps = 12",
        "eval_steps = 40",
        "cfg = 4.0",
        "noise_level = 0.7",
        "window_size = 3",
        "window_range = [0, 6]",
        "steps = 300",
        "workers = 8",
        'name = "pickscore"',
        'name = "image_similarity"',
        '"bfloat16"',
        "gradient_checkpointing = true",
    )
    for setting in settings:
        assert setting in text, setting


def test_check_refuses_rows_the_model_cannot_take(tiny_edit_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``qwen_image_edit`` takes one image per row: the two-image rows of edits_plus.jsonl stop ``check`` (exit 2)
    naming the row; the Plus model takes them."""
    example = str(EXAMPLES / "qwen_image_edit_tiny.toml")
    sets = _sets(f"model.options.path={tiny_edit_path}", f"data.train={DATA / 'edits_plus.jsonl'}")
    assert main(["check", example, *sets]) == 2
    assert "edits_plus.jsonl" in capsys.readouterr().err
