"""docs/examples/wan_i2v_tiny.toml through the real CLI: 2 Flow-GRPO steps on a tiny random Wan2.1 I2V pipeline
built on the fly, prompt rows with first-frame PNGs, JPEG compressibility per frame (it varies on the random
videos); the sample grid shows each first frame beside every frame of its video. ``omni-rl check`` refuses
image-free rows for ``wan_i2v`` before anything is built. 1 vs 2 workers (slow, DDP and FSDP2) give the same run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from safetensors.torch import load_file

from omni_rl.cli import main
from omni_rl.reporting.image_grids import beside_sources
from omni_rl.testing.ray import local_ray

EXAMPLES = Path(__file__).parents[3] / "docs" / "examples"
EXAMPLE = EXAMPLES / "wan_i2v_tiny.toml"
DATA = EXAMPLES / "data" / "wan_first_frames" / "first_frames.jsonl"
SIZE, FRAMES, GROUP = 32, 5, 4


@pytest.fixture(scope="module")
def ray_cluster():
    with local_ray():
        yield


def _run(out: Path, model: Path, *extra: str) -> list[dict]:
    """The example for 2 steps, a checkpoint every step (the worker-count test compares the LoRA after each)."""
    sets = [
        f"run.output_dir={out}",
        f"model.options.path={model}",
        f"data.train={DATA}",
        f"data.val={DATA}",
        "run.steps=2",
        "run.save_every=1",
        "run.eval_every=2",
        *extra,
    ]
    assert main(["run", str(EXAMPLE), *[arg for value in sets for arg in ("--set", value)]]) == 0
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory, ray_cluster) -> Path:
    """The example as a user runs it, for 2 steps; the tiny pipeline is written on the first build (its path does not
    exist yet), the data paths are absolute so the test runs from any directory."""
    root = tmp_path_factory.mktemp("wan-i2v-run")
    _run(root / "run", root / "wan-i2v-tiny")
    assert (root / "wan-i2v-tiny" / "model_index.json").is_file()
    return root / "run"


def test_two_steps_train_on_first_frames(run_dir: Path) -> None:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [1, 2]
    for row in rows:
        assert np.isfinite(row["reward/mean"]) and row["actor/grad_norm"] > 0
    assert rows[0]["actor/ratio_mean"] == pytest.approx(1.0, abs=1e-6)  # on-policy at the first step
    assert np.isfinite(rows[-1]["val/reward/mean"])
    assert (run_dir / "checkpoints" / "step_2" / "pytorch_lora_weights.safetensors").is_file()


def _panels() -> list[np.ndarray]:
    """Each example first frame as the grids draw it: fitted into the video's frame size (aspect kept)."""
    panels = []
    for line in DATA.read_text().splitlines():
        with Image.open(DATA.parent / json.loads(line)["image"]) as image:
            source = np.asarray(image.convert("RGB"))
        cell = beside_sources(np.zeros((1, 1, SIZE, SIZE, 3), dtype=np.uint8), [(source,)])
        panels.append(cell[0, 0, :, :SIZE])
    return panels


@pytest.mark.parametrize("name", ["samples_step_1", "val_step_2"])
def test_the_grid_shows_each_first_frame_beside_its_video(run_dir: Path, name: str) -> None:
    """Each cell is the video's frames side by side, each frame preceded by the prompt's first frame: the same
    source panel at every frame of a cell, and the same one across a group's cells (one prompt row per group)."""
    with Image.open(run_dir / f"{name}.png") as image:
        grid = np.asarray(image.convert("RGB"))
    panels = _panels()
    cell_w = FRAMES * 2 * SIZE
    cells = grid.shape[1] // cell_w
    assert cells >= 2 and grid.shape[1] == cells * cell_w
    found = []
    for c in range(cells):
        x0 = c * cell_w
        hits = [
            (y, k)
            for y in range(grid.shape[0] - SIZE)
            for k, panel in enumerate(panels)
            if np.array_equal(grid[y : y + SIZE, x0 : x0 + SIZE], panel)
        ]
        assert hits, f"cell {c} of {name} shows no first frame of the data"
        y, k = hits[0]
        for t in range(FRAMES):  # every frame of the strip has the source to its left
            x = x0 + t * 2 * SIZE
            assert np.array_equal(grid[y : y + SIZE, x : x + SIZE], panels[k])
        found.append(k)
    if name.startswith("samples"):  # GROUP samples of each prompt row, in order
        assert all(len(set(found[g : g + GROUP])) == 1 for g in range(0, len(found), GROUP))


def test_check_refuses_rows_without_a_first_frame(tmp_path: Path) -> None:
    """``wan_i2v`` takes exactly one first frame per row: a text-only prompt file stops ``check`` (exit 2)."""
    sets = [f"model.options.path={tmp_path / 'never-built'}", f"data.train={EXAMPLES / 'prompts' / 'objects.txt'}"]
    assert main(["check", str(EXAMPLE), *[arg for value in sets for arg in ("--set", value)]]) == 2


def _lora(run: Path, step: int) -> dict[str, torch.Tensor]:
    return load_file(str(run / "checkpoints" / f"step_{step}" / "worker_0" / "trainable.safetensors"))


#: AdamW's first step moves each LoRA-B entry by lr * g / (|g| + eps): at the default eps (1e-8) an entry whose
#: gradient is near 0 turns the summation-order rounding of 1 vs 2 workers (~1e-11 there) into ~1e-5 of weight (up to
#: 4e-4 relative for a tensor, measured), and by step 2 one frame's JPEG is a byte off, so the rewards differ by
#: 1 byte / 40 frames. An eps above the gradients (~1e-4) keeps the update linear in them, so rounding stays
#: rounding; both runs of the comparison use it.
LINEAR_ADAM = "optim.eps=1e-3"


@pytest.fixture(scope="module")
def one_worker(run_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[dict]]:
    """(the tiny pipeline the module's run wrote, this run's directory, its metrics rows)"""
    model, out = run_dir.parent / "wan-i2v-tiny", tmp_path_factory.mktemp("wan-i2v-one") / "run"
    return model, out, _run(out, model, LINEAR_ADAM, "log.image_every=0")


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["ddp", "fsdp2"])
def test_two_workers_match_one(one_worker, tmp_path: Path, strategy: str) -> None:
    """As the image models' (tests/integration/test_model_workers.py, the Kontext and Qwen-Image-Edit runs): the
    same rewards and gradient norms, and the same LoRA after every update, with the groups (and their first frames,
    sliced by the request's select) split over two workers; FSDP2 with each transformer block one unit. Both runs
    use the tiny pipeline the module's run wrote."""
    model, one_dir, one = one_worker
    sets = ("cluster.workers=2", f"cluster.strategy={strategy}", LINEAR_ADAM, "log.image_every=0")
    two = _run(tmp_path / "two", model, *sets)
    assert [r["step"] for r in one] == [r["step"] for r in two] == [1, 2]
    for a, b in zip(one, two, strict=True):
        assert a["reward/mean"] == b["reward/mean"] and a["reward/std"] == b["reward/std"]
        assert abs(a["actor/grad_norm"] - b["actor/grad_norm"]) <= 1e-5 * abs(a["actor/grad_norm"])
    for step in (1, 2):
        expected, got = _lora(one_dir, step), _lora(tmp_path / "two", step)
        assert got.keys() == expected.keys()
        for name, want in expected.items():
            error = torch.linalg.vector_norm(got[name] - want) / max(float(torch.linalg.vector_norm(want)), 1e-12)
            assert error < 1e-4, (step, name, float(error))
