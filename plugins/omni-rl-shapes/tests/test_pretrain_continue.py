"""`pretrain --init-from`: a continued stage, end to end on the shipped pipeline (2 steps, ~40 s on one core).

The shipped model was made by such stages (README, "The pretrained tiny SD3"); this keeps the path that copies the
pipeline, trains on stray-object scenes and chains the records working, and checks it leaves its source alone."""

from __future__ import annotations

import json
from pathlib import Path

import omni_rl_shapes
import pytest
import torch
from omni_rl_shapes.evaluate import RECORD_FILE
from omni_rl_shapes.pretraining.pretrain import main


@pytest.mark.slow  # over 45 s in the default suite; `nox -s integration` / `pytest -m slow` run it
def test_a_continued_stage_chains_its_record_and_leaves_the_source_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    source = omni_rl_shapes.pretrained_path()
    before = (source / RECORD_FILE).read_text()
    out = tmp_path / "stage"
    argv = ["--init-from", str(source), "--out", str(out), "--stray-rate", "0.5", "--strays", "2", "--seed", "9"]
    argv += [
        "--steps",
        "2",
        "--images-per-prompt",
        "1",
        "--eval-from",
        "2",
        "--eval-every",
        "2",
        "--target-low",
        "0",
        "--target-high",
        "1",
    ]
    threads = torch.get_num_threads()
    try:
        assert main(argv) == 0
    finally:
        torch.set_num_threads(threads)  # main sets its own (--threads 1) for the whole process

    record = json.loads((out / RECORD_FILE).read_text())
    assert record["stray_rate"] == 0.5 and record["strays"] == 2 and record["transformer"]["steps"] == 2
    assert record["init_from"]["path"] == str(source)
    assert record["init_from"]["command"] == json.loads(before)["command"]
    assert record["vae"] == json.loads(before)["vae"]  # no VAE stage: the source's VAE and its record carry over
    assert 0.0 <= record["val"]["score"] <= 1.0
    assert (out / "transformer" / "diffusion_pytorch_model.safetensors").is_file()
    assert (source / RECORD_FILE).read_text() == before
    assert not list(tmp_path.glob(".stage.*"))  # the staging directory is gone
