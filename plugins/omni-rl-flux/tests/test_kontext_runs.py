"""Whole ``flux_kontext`` runs through the CLI: docs/examples/kontext_tiny.toml (Flow-GRPO on edit rows whose
sources have four sizes) for 2 steps, its sample grid (each source beside its result), the LoRA the run writes
loaded by ``FluxKontextPipeline.load_lora_weights``, 1 vs 2 workers (slow), a rollout worker apart from the policy
worker at staleness 1 and 0 (slow: the sources travel in the rollout request), and the FLUX.1-Kontext-dev recipe
validated with ``omni-rl check``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from kontext_helpers import load_kontext_pipe, pipe_edit
from PIL import Image
from safetensors.torch import load_file

from omni_rl.cli import main
from omni_rl.testing.ray import local_ray

EXAMPLES = Path(__file__).parents[3] / "docs" / "examples"
EDITS = EXAMPLES / "data" / "kontext_edits" / "edits.jsonl"
#: the rollout size of these runs: 10x10 latents, so a cell of the grid (source then result) is 80 px wide
SIZE = 40
#: the tiny example shrunk to 2 steps of 2 prompts x 2 images at 40 px, a checkpoint and a sample grid every step
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


def _run(out: Path, path: Path, *extra: str) -> list[dict]:
    sets = [f"run.output_dir={out}", f"model.options.path={path}", f"data.train={EDITS}", *SMALL, *extra]
    assert main(["run", str(EXAMPLES / "kontext_tiny.toml"), *_sets(*sets)]) == 0
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory, tiny_kontext_path: Path, ray_cluster) -> tuple[Path, list]:
    out = tmp_path_factory.mktemp("kontext-run") / "run"
    return out, _run(out, tiny_kontext_path)


def test_tiny_example_runs_two_steps(tiny_run) -> None:
    _, rows = tiny_run
    assert [r["step"] for r in rows] == [1, 2]
    assert all(r["actor/grad_norm"] > 0 for r in rows)
    assert all(r["reward/std"] > 0 for r in rows)  # JPEG compressibility varies on the noise


def _source_beside_result(grid: np.ndarray) -> None:
    """A step's sample grid, colocated or from a rollout worker: 80 px cells (source + result), two columns, the
    first cell's source panel light."""
    assert grid.shape[1] == 2 * 2 * SIZE
    # the first cell's source panel (under the title bar: font max(9, min(12, 80 // 12)) = 9, + 10 px) is the
    # light source, not the black of a missing one
    top = 9 + 10
    assert grid[top : top + SIZE, :SIZE].mean() > 100


def test_the_sample_grid_shows_each_source_beside_its_result(tiny_run) -> None:
    """A cell holds the source panel and the 40 px result side by side (80 px, upscaled by 128 // 80 = 1); a grid of
    results alone would have 120 px cells (40 px upscaled by 3). Two columns: the group size."""
    out, _ = tiny_run
    _source_beside_result(np.asarray(Image.open(out / "samples_step_1.png").convert("RGB")))


def test_the_lora_the_run_writes_loads_with_the_pipeline(tiny_run, tiny_kontext_path: Path, tmp_path: Path) -> None:
    out, _ = tiny_run
    assert main(["export", str(out), "--out", str(tmp_path / "lora")]) == 0
    assert (tmp_path / "lora" / "pytorch_lora_weights.safetensors").is_file()
    source = np.asarray(Image.open(EDITS.parent / "sources" / "red_circle.png").convert("RGB"))
    pipe = load_kontext_pipe(tiny_kontext_path)
    edit = {"steps": 4, "seed": 0, "guidance": 2.5, "height": SIZE, "width": SIZE}
    base, _ = pipe_edit(pipe, "make the red circle blue", source, **edit)
    pipe.load_lora_weights(tmp_path / "lora")
    tuned, _ = pipe_edit(pipe, "make the red circle blue", source, **edit)
    assert not torch.allclose(base, tuned, atol=1e-5)


def _lora(run: Path, step: int) -> dict[str, torch.Tensor]:
    return load_file(str(run / "checkpoints" / f"step_{step}" / "worker_0" / "trainable.safetensors"))


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["ddp", "fsdp2"])
def test_two_workers_match_one(tiny_run, tiny_kontext_path: Path, tmp_path: Path, strategy: str) -> None:
    """As tests/integration/test_model_workers.py for FLUX and Qwen-Image: the same rewards and gradient norms, and
    the same LoRA after every update, with the edit groups (and their conditions) split over two workers; FSDP2 with
    each double- and single-stream block one unit."""
    one_run, one = tiny_run
    extra = ("cluster.workers=2", f"cluster.strategy={strategy}", "log.image_every=0")
    two = _run(tmp_path / "two", tiny_kontext_path, *extra)
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


#: one policy worker and one rollout worker (docs/distributed.md "Rollout workers"), a CPU each: the module's Ray
APART = ("cluster.rollout_workers=1", "cluster.rollout_cpus_per_worker=1")


@pytest.mark.slow
def test_one_step_off_sampling_carries_the_sources(tiny_kontext_path: Path, tmp_path: Path, ray_cluster) -> None:
    """Disaggregated at ``max_staleness = 1``: the rollout worker gets each request's condition images (sliced by its
    select) and samples batch 2 while step 1 trains, with version 0; its step-1 grid shows each source beside its
    result, as the colocated run's does."""
    rows = _run(tmp_path / "off", tiny_kontext_path, *APART, "run.max_staleness=1")
    assert [r["step"] for r in rows] == [1, 2]
    assert [r["rollout/version"] for r in rows] == [0, 0]
    assert [r["rollout/staleness"] for r in rows] == [0, 1]
    assert all(r["actor/grad_norm"] > 0 and r["reward/std"] > 0 for r in rows)
    # the old log-probs are recomputed with the version that sampled, with the same sources: on-policy to rounding
    assert all(r["rollout_corr/abs_delta_max"] < 1e-4 for r in rows)
    _source_beside_result(np.asarray(Image.open(tmp_path / "off" / "samples_step_1.png").convert("RGB")))


@pytest.mark.slow
def test_disaggregated_staleness_0_reproduces_the_colocated_run(tiny_run, tiny_kontext_path: Path, tmp_path) -> None:
    """As tests/integration/test_rollout_workers.py for the text-only SD3: at ``max_staleness = 0`` the rollout
    worker (same weights, seeds, sources and chunking: all 4 samples in one batch) gives the colocated step-1 grid bit
    for bit, the same rewards at every step and the same update metrics to float rounding."""
    colocated_dir, colocated = tiny_run
    apart = _run(tmp_path / "apart", tiny_kontext_path, *APART)
    grid = np.asarray(Image.open(tmp_path / "apart" / "samples_step_1.png").convert("RGB"))
    _source_beside_result(grid)
    assert np.array_equal(grid, np.asarray(Image.open(colocated_dir / "samples_step_1.png").convert("RGB")))
    assert len(colocated) == len(apart) == 2
    for step, (a, b) in enumerate(zip(colocated, apart, strict=True), start=1):
        assert a["reward/mean"] == b["reward/mean"] and a["reward/std"] == b["reward/std"], step
        for key in ("actor/loss", "actor/grad_norm", "actor/ratio_mean"):
            assert b[key] == pytest.approx(a[key], rel=1e-5, abs=1e-9), (step, key)
        assert b["rollout/version"] == step - 1 and b["rollout/staleness"] == 0


def test_the_kontext_dev_recipe_passes_check(tiny_kontext_path: Path) -> None:
    """Documented as not run here (no GPU, no hub): the config is validated against the tiny Kontext pipeline and
    the shipped edit rows. GenEval needs its detector's and CLIP's weights and GenEval metadata on every row, which
    omni-rl-geneval's own tests check; here its place is taken by a reward that needs neither, and the recipe's
    text is checked to hold flow_grpo's settings."""
    path = EXAMPLES / "kontext_dev_flow_grpo.toml"
    sets = [
        f"model.options.path={tiny_kontext_path}",
        f"data.train={EDITS}",
        f"data.val={EDITS}",
        "reward.1.name=jpeg_compressibility",
        "reward.1.options={}",
    ]
    assert main(["check", str(path), *_sets(*sets)]) == 0
    text = path.read_text()
    settings = (
        'name = "flux_kontext"',
        "guidance = 2.5",
        "cfg = 1.0",
        "height = 512",
        "steps = 6",
        "eval_steps = 28",
        "group_size = 21",
        "prompts_per_step = 48",
        "noise_level = 0.9",
        "kl_coef = 0.0",
        "lora_rank = 32",
        "lora_alpha = 64",
        "lr = 3e-4",
        "clip_ratio = 1e-4",
        "condition_max_area = 262144",
        'name = "image_similarity"\nweight = 0.5',
        'name = "geneval"\nweight = 0.5',
        '"bfloat16"',
        "gradient_checkpointing = true",
    )
    for setting in settings:
        assert setting in text, setting
