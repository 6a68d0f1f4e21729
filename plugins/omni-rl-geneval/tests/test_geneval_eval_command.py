"""``omni-rl eval PIPELINE_DIR --benchmark geneval`` end to end: a tiny random SD3 pipeline sampled through the
sd3 model and diffusers rollout plugins, scored by the tiny detector and CLIP, GenEval's report written; a
second call resumes (nothing regenerated), other settings in the same directory are refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from omni_rl_sd3.tiny import build_tiny_sd3_pipeline

from omni_rl.cli import main

FAST = [
    "--set=rollout.options.height=32",
    "--set=rollout.options.width=32",
    "--set=rollout.options.eval_steps=2",
    "--set=rollout.options.batch_size=8",
    "--set=model.options.max_sequence_length=16",
]


@pytest.fixture(scope="module")
def tiny_sd3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_sd3_pipeline(tmp_path_factory.mktemp("sd3") / "pipeline")


def command(pipeline: Path, out: Path, options: dict[str, Any], *extra: str) -> list[str]:
    benchmark = [f"--set=benchmark.{key}={value}" for key, value in options.items()]
    return [
        "eval",
        str(pipeline),
        "--benchmark",
        "geneval",
        "--out",
        str(out),
        "--device",
        "cpu",
        *FAST,
        *benchmark,
        *extra,
    ]


def test_eval_geneval_on_a_tiny_sd3_pipeline(
    tiny_sd3: Path, tiny_options: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "eval"
    args = command(tiny_sd3, out, tiny_options, "--limit", "6", "--images-per-prompt", "2")
    assert main(args) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert "Task breakdown" in printed and "Overall score (avg. over tasks)" in printed
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(results) == 12  # 6 prompts (one per tag) x 2 images
    assert {r["metadata"]["tag"] for r in results} == {
        "single_object",
        "two_object",
        "counting",
        "colors",
        "position",
        "color_attr",
    }
    summary = json.loads((out / "summary.json").read_text())
    assert summary["images"] == 12 and summary["prompts"] == 6 and len(summary["rows"]) == 6
    assert summary["overall"] == pytest.approx(sum(row["score"] for row in summary["rows"]) / 6)
    assert all(row["total"] == 2 for row in summary["rows"])
    for r in results:
        assert (out / r["image"]).is_file() and 0.0 <= r["score"] <= 1.0
    info = json.loads((out / "eval_info.json").read_text())
    assert info["generator"]["model"]["name"] == "sd3" and info["settings"]["limit"] == 6

    before = (out / "results.jsonl").read_text()
    assert main(args) == 0  # resumes: every image is already scored, so nothing is appended
    assert (out / "results.jsonl").read_text() == before

    assert main(command(tiny_sd3, out, tiny_options, "--limit", "6", "--seed", "1")) == 2
    assert "other settings" in capsys.readouterr().err


def test_eval_needs_a_run_or_a_pipeline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", str(tmp_path), "--benchmark", "geneval"]) == 2
    assert "neither an omni-rl run directory nor a pipeline directory" in capsys.readouterr().err
    assert main(["eval", str(tmp_path), "--benchmark", "genevall"]) == 2
    assert "did you mean 'geneval'" in capsys.readouterr().err


def test_a_detector_not_cached_offline_is_refused_before_sampling(
    tiny_sd3: Path,
    tiny_options: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The benchmark checks its models when built, before the first prompt is sampled (issue 48, E3)."""
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    out = tmp_path / "eval"
    options = {**tiny_options, "detector": "nobody/not-cached"}
    assert main(command(tiny_sd3, out, options, "--limit", "1")) == 2
    err = capsys.readouterr().err
    assert "$.benchmark.options.detector = 'nobody/not-cached' cannot be loaded" in err
    assert not (out / "images").exists() and not (out / "results.jsonl").exists()
