"""The ``shapes`` benchmark of ``omni-rl eval``: its conformance, its seeds and pipeline settings (those of the
shipped pipelines' pretraining records), its table, and the issue's check: ``omni-rl eval <shipped pipeline>
--benchmark shapes`` reproduces the val reward recorded with the pipeline."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import omni_rl_shapes
import pytest
from omni_rl_shapes.benchmark import ShapesBenchmark, summarize
from omni_rl_shapes.evaluate import _jobs, read_record, settings_from_record
from omni_rl_shapes.hooks import omni_rl_benchmarks

from omni_rl.benchmark import ImageResult
from omni_rl.cli import main
from omni_rl.data import PromptRecord
from omni_rl.specs import BenchmarkSpec
from omni_rl.testing import BenchmarkConformance


class TestShapesBenchmark(BenchmarkConformance):
    @pytest.fixture
    def spec(self) -> BenchmarkSpec:
        (spec,) = [s for s in omni_rl_benchmarks() if s.name == "shapes"]
        return spec


def test_seeds_are_the_pretraining_vals() -> None:
    """Image j of prompt i: the seed ``evaluate.py`` gives it (``seed_offset + i + j · 48``)."""
    benchmark = ShapesBenchmark()
    prompts = [r.prompt for r in benchmark.prompts()]
    assert prompts == omni_rl_shapes.read_prompts("val")
    settings = settings_from_record(read_record(omni_rl_shapes.pretrained_path("qwen_image")))
    assert benchmark.images_per_prompt == settings.images_per_prompt and settings.seed_offset == 0
    expected = _jobs(prompts, settings)  # (prompt, seed), image j of every prompt after image j - 1 of all
    n = len(prompts)
    assert [(prompts[i], benchmark.image_seed(0, i, j)) for j in range(2) for i in range(n)] == expected


@pytest.mark.parametrize("arch", ["sd3", "qwen_image"])
def test_a_shipped_pipeline_is_sampled_with_its_records_settings(arch: str, tmp_path: Path) -> None:
    settings = settings_from_record(read_record(omni_rl_shapes.pretrained_path(arch)))
    overrides = ShapesBenchmark().pipeline_overrides(omni_rl_shapes.pretrained_path(arch))
    assert overrides == [
        f"rollout.options.height={settings.size}",
        f"rollout.options.width={settings.size}",
        f"rollout.options.eval_steps={settings.num_inference_steps}",
        f"rollout.options.eval_cfg={settings.guidance_scale}",
        f"model.options.max_sequence_length={settings.max_sequence_length}",
    ]
    assert ShapesBenchmark().pipeline_overrides(tmp_path) == []  # another pipeline: the core's defaults


def test_the_table_is_the_val_reward_and_its_sub_scores() -> None:
    benchmark = ShapesBenchmark()
    images = np.full((2, 32, 32, 3), 255, dtype=np.uint8)
    images[0, 4:12, 4:12] = (220, 40, 40)  # a red square in the top left: right for prompt 0, wrong for 1
    records = [PromptRecord("a red square"), PromptRecord("three yellow squares")]
    verdicts = benchmark.score(images, records)
    assert verdicts[0].correct and verdicts[0].score == 1.0 and verdicts[0].reason == ""
    assert not verdicts[1].correct and verdicts[1].reason  # names the sub-scores below 1
    assert set(verdicts[0].details) == {"color", "count", "shape", "position"}
    results = [
        ImageResult(
            index=i,
            sample=0,
            prompt=r.prompt,
            metadata={},
            correct=v.correct,
            score=v.score,
            reason=v.reason,
            image="",
            seed=i,
            details=v.details,
        )
        for i, (r, v) in enumerate(zip(records, verdicts, strict=True))
    ]
    summary = summarize(results)
    assert summary.overall == pytest.approx((verdicts[0].score + verdicts[1].score) / 2)
    assert summary.correct_images == 0.5 and [row.name for row in summary.rows] == [
        "color",
        "count",
        "shape",
        "position",
    ]
    assert "Val reward (mean score)" in summary.text


def _eval(target: str, out: Path, *extra: str) -> dict:
    assert main(["eval", target, "--benchmark", "shapes", "--device", "cpu", "--out", str(out), *extra]) == 0
    return json.loads((out / "summary.json").read_text())


def _check_against_record(summary: dict, arch: str) -> None:
    recorded = read_record(omni_rl_shapes.pretrained_path(arch))["val"]
    assert summary["images"] == 96 and summary["prompts"] == 48
    # measured on this machine: equal to the last digit (the same images); the tolerance is test_pretrained's,
    # for float differences between machines and thread counts
    assert summary["overall"] == pytest.approx(recorded["score"], abs=0.03)
    assert summary["correct_images"] == pytest.approx(recorded["strict"], abs=0.03)
    for row in summary["rows"]:
        assert row["score"] == pytest.approx(recorded[row["name"]], abs=0.05), row["name"]


@pytest.mark.usefixtures("one_thread")
def test_eval_draws_the_images_the_record_was_measured_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fast and per image: ``--limit 1`` on the Qwen-Image pipeline, each PNG against the image the pretraining's
    own sampler (``evaluate.sample_model``, which measured the record) draws for that prompt and seed."""
    pytest.importorskip("omni_rl_qwen_image")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import attrs
    from omni_rl_shapes.evaluate import sample_model
    from PIL import Image

    import omni_rl
    from omni_rl.context import BuildContext

    out = tmp_path / "eval"
    _eval("package:omni_rl_shapes:pretrained_qwen_image", out, "--limit", "1")
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted((r["index"], r["sample"], r["seed"]) for r in results) == [(0, 0, 0), (0, 1, 48)]
    settings = settings_from_record(read_record(omni_rl_shapes.pretrained_path("qwen_image")))
    options = {"path": "package:omni_rl_shapes:pretrained_qwen_image", "lora_rank": 0, "max_sequence_length": 32}
    model = omni_rl.build("model", "qwen_image", options, BuildContext(device="cpu"))
    for r in results:
        one = attrs.evolve(settings, images_per_prompt=1, seed_offset=r["seed"])
        _, reference = sample_model(model, [r["prompt"]], one)
        drawn = np.asarray(Image.open(out / r["image"]).convert("RGB")).astype(int)
        assert np.abs(drawn - reference[0].astype(int)).max() <= 1, r["image"]  # float rounding at most


@pytest.mark.slow  # 45-60 s on 2 busy CPU cores: all 96 images
@pytest.mark.usefixtures("one_thread")
def test_eval_reproduces_the_qwen_image_pipelines_recorded_val_reward(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The quickstart's model, named as a config names it (``package:``), sampled by the qwen_image model and the
    diffusers rollout with the record's settings, which the benchmark supplies."""
    pytest.importorskip("omni_rl_qwen_image")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    summary = _eval("package:omni_rl_shapes:pretrained_qwen_image", tmp_path / "eval")
    _check_against_record(summary, "qwen_image")
    info = json.loads((tmp_path / "eval" / "eval_info.json").read_text())
    assert info["generator"]["rollout"]["options"]["eval_steps"] == 10
    assert (tmp_path / "eval" / "images" / "00047" / "samples" / "0001.png").is_file()


@pytest.mark.slow  # 50 s - 2 min on 2 busy CPU cores (three text encoders, T5 included)
@pytest.mark.usefixtures("one_thread")
def test_eval_reproduces_the_sd3_pipelines_recorded_val_reward(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The SD3 pipeline's val was sampled by ``StableDiffusion3Pipeline`` itself; the diffusers rollout draws the
    same images (its validation is the pipeline's Euler ODE)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _check_against_record(_eval(str(omni_rl_shapes.pretrained_path("sd3")), tmp_path / "eval"), "sd3")
