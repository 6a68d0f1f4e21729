"""``omni-rl eval RUN_DIR --benchmark shapes --compare A B`` on a tiny run: the quickstart's config with two LoRA
checkpoints written by the model's own ``save_lora`` (step 0: the untrained adapter, step 1: moved), no training.
Each step is evaluated into its own folder and the comparison table holds both columns and B - A."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from omni_rl import BuildContext, load_config
from omni_rl.cli import main
from omni_rl.config import write_resolved

os.environ.setdefault("HF_HUB_OFFLINE", "1")

QUICKSTART = Path(__file__).parents[3] / "docs" / "examples" / "quickstart.toml"


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The quickstart run directory with checkpoints of steps 0 and 1 (the second LoRA moved off zero)."""
    pytest.importorskip("omni_rl_qwen_image")
    import torch

    run_dir = tmp_path_factory.mktemp("run") / "quickstart"
    config = load_config(QUICKSTART, [f"run.output_dir={run_dir}"])
    write_resolved(config, run_dir)
    model = config.components["model"].build(BuildContext(seed=config.run.seed))
    model.save_lora(run_dir / "checkpoints" / "step_0")
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for param in model.trainable_parameters():
            param.add_(0.3 * torch.randn(param.shape, generator=generator))
    model.save_lora(run_dir / "checkpoints" / "step_1")
    return run_dir


def test_compare_two_steps_of_a_run(tiny_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["eval", str(tiny_run), "--benchmark", "shapes", "--compare", "0", "1", "--limit", "2", "--device", "cpu"]
    assert main(args) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert "shapes: step 0 vs step 1 (difference = step 1 - step 0)" in printed

    steps = [tiny_run / "eval" / f"shapes_step_{n}" for n in (0, 1)]
    summaries = [json.loads((s / "summary.json").read_text()) for s in steps]
    for n, folder in zip((0, 1), steps, strict=True):
        assert json.loads((folder / "eval_info.json").read_text())["generator"]["step"] == n
    a = np.asarray(Image.open(steps[0] / "images" / "00000" / "samples" / "0000.png"))
    b = np.asarray(Image.open(steps[1] / "images" / "00000" / "samples" / "0000.png"))
    assert np.abs(a.astype(int) - b.astype(int)).max() > 0  # the moved LoRA draws another image

    out = tiny_run / "eval" / "shapes_step_0_vs_1"
    table = list(csv.reader((out / "comparison.csv").open()))
    assert table[0] == ["group", "step 0", "step 1", "difference"]
    assert [row[0] for row in table[1:]] == [
        "color",
        "count",
        "shape",
        "position",
        "% correct images",
        "% correct prompts",
        "overall",
    ]
    overall = table[-1]
    assert float(overall[1]) == pytest.approx(summaries[0]["overall"], abs=1e-6)
    assert float(overall[2]) == pytest.approx(summaries[1]["overall"], abs=1e-6)
    assert float(overall[3]) == pytest.approx(summaries[1]["overall"] - summaries[0]["overall"], abs=1e-5)
    record = json.loads((out / "comparison.json").read_text())
    assert record["labels"] == ["step 0", "step 1"] and len(record["summaries"]) == 2
    assert (out / "comparison.txt").read_text().startswith("shapes: step 0 vs step 1")

    before = (steps[0] / "results.jsonl").read_text()
    assert main(args) == 0  # both evaluations resume: nothing is sampled again
    assert (steps[0] / "results.jsonl").read_text() == before


def test_compare_needs_a_run_and_two_steps(tiny_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pipeline = "package:omni_rl_shapes:pretrained_qwen_image"
    assert main(["eval", pipeline, "--benchmark", "shapes", "--compare", "0", "1"]) == 2
    assert "is not a run directory" in capsys.readouterr().err
    assert main(["eval", str(tiny_run), "--benchmark", "shapes", "--compare", "1", "1"]) == 2
    assert "two different steps" in capsys.readouterr().err
    assert main(["eval", str(tiny_run), "--benchmark", "shapes", "--step", "1", "--compare", "0", "1"]) == 2
    assert "not allowed with argument --step" in capsys.readouterr().err
