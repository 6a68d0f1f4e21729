"""The whole scorer on tiny random Mask2Former and CLIP models loaded by path: detector post-processing on
hand-made logits, masked crops, the reward's scores and details against verdicts computed by hand, the reward
conformance suite, the offline errors naming the option, and the reward in a Ray reward actor."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import huggingface_hub.constants
import numpy as np
import pytest
import torch
from omni_rl_geneval.colors import BACKGROUND, masked_crop
from omni_rl_geneval.detector import _image_detections
from omni_rl_geneval.hooks import omni_rl_benchmarks, omni_rl_reward_models
from omni_rl_geneval.metadata import class_names, evaluation_prompts
from omni_rl_geneval.rules import Detection, evaluate, keep_all
from PIL import Image

from omni_rl.config import structure_options
from omni_rl.config.schema import ResolvedComponent
from omni_rl.context import BuildContext
from omni_rl.errors import ConfigError
from omni_rl.specs import BenchmarkSpec, RewardSpec
from omni_rl.testing import BenchmarkConformance, PluginConformance, RewardConformance

SPEC = omni_rl_reward_models()[0]
PICK = [0, 100, 200, 300, 400, 500]  # one prompt of each tag (the set is ordered by tag)


def build(options: dict[str, Any], ctx: BuildContext | None = None) -> Any:
    return SPEC.factory(structure_options(SPEC, options), ctx or BuildContext())


@pytest.fixture(scope="module")
def batch() -> tuple[np.ndarray, list[str], list[dict[str, Any]]]:
    records = [evaluation_prompts()[i] for i in PICK]
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(len(records), 48, 48, 3), dtype=np.uint8)
    return images, [r.prompt for r in records], [r.metadata for r in records]


def test_detector_post_processing_on_hand_made_logits() -> None:
    """Query 0 is a confident cat (label 15) whose mask logits are +4 on a 4 x 4 block at (x 4-7, y 8-11)."""
    cat = class_names().index("cat")
    logits = torch.full((3, 81), -10.0)
    logits[0, cat] = 10.0  # softmax ~ 1 for cat
    logits[1:, 80] = 10.0  # the other queries: no object
    masks = torch.full((3, 16, 16), -8.0)
    masks[0, 8:12, 4:8] = 4.0
    found = _image_detections(logits, masks, padded=(16, 16), valid=(16, 16), size=(16, 16))
    (best, *_) = sorted(found["cat"], key=lambda d: -d.score)
    assert best.box == (4.0, 8.0, 8.0, 12.0)
    inside = torch.sigmoid(torch.tensor(4.0)).item()
    assert best.score == pytest.approx(inside, rel=1e-3) and best.mask.sum() == 16
    assert all(d.score < 1e-3 for name, ds in found.items() for d in ds if d is not best)


def test_masked_crop_is_the_object_over_grey() -> None:
    image = Image.fromarray(np.full((10, 10, 3), 200, dtype=np.uint8))
    mask = np.zeros((10, 10), dtype=bool)
    mask[2:4, 2:4] = True
    crop = np.asarray(masked_crop(image, Detection(box=(1, 1, 5, 5), score=1.0, mask=mask)))
    assert crop.shape == (4, 4, 3)
    assert (crop[1:3, 1:3] == 200).all() and tuple(crop[0, 0]) == BACKGROUND


def test_reward_scores_are_the_rules_on_the_models_outputs(tiny_options: dict[str, Any], batch: Any) -> None:
    images, prompts, metadata = batch
    reward = build(tiny_options)
    result = reward(images, prompts, metadata)
    loaded = reward.scorer.loaded
    detected = loaded.detector.detect([Image.fromarray(a) for a in images])
    for k, (image, found, meta) in enumerate(zip(images, detected, metadata, strict=True)):
        kept = keep_all(found, meta["tag"], reward.scorer.limits)
        pil = Image.fromarray(image)
        verdict = evaluate(meta, kept, lambda name, ds, pil=pil: loaded.colors(pil, name, ds))
        assert result.scores[k] == pytest.approx(verdict.partial)
        assert result.details["strict"][k] == float(verdict.correct)
        assert result.details[meta["tag"]][k] == pytest.approx(verdict.partial)
        others = [tag for tag in result.details if tag not in ("strict", "partial", meta["tag"])]
        assert all(np.isnan(result.details[tag][k]) for tag in others)
    # the random detector finds every class at threshold 0 (8 queries x 80 classes, top 100 pairs)
    assert all(len(found) > 0 for found in detected)


def test_nothing_kept_gives_the_hand_computed_partial_scores(tiny_options: dict[str, Any], batch: Any) -> None:
    """Above every confidence nothing is detected: each include clause fails, each exclude clause is met."""
    images, prompts, metadata = batch
    result = build({**tiny_options, "threshold": 0.999, "counting_threshold": 0.999})(images, prompts, metadata)
    # single_object 0/1, two_object 0/2, counting 1/2 (exclude met), colors 0/2, position 0/3, color_attr 0/4
    np.testing.assert_allclose(result.scores, [0, 0, 0.5, 0, 0, 0])
    assert (result.details["strict"] == 0).all()


def test_metadata_that_is_not_genevals_is_a_clear_failure(tiny_options: dict[str, Any], batch: Any) -> None:
    from omni_rl.errors import RuntimeFailure

    images, prompts, _ = batch
    with pytest.raises(RuntimeFailure, match="make_prompts"):
        build(tiny_options)(images[:1], prompts[:1], [{}])


@pytest.mark.parametrize("option", ["detector", "clip_model"])
def test_missing_models_offline_fail_when_built_naming_the_option(
    option: str, tiny_options: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Offline, a hub id not in the cache is refused when the reward is built (in the process that will load it:
    a reward actor, a serve-reward replica, the benchmark before sampling), not at its first batch."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(ConfigError) as caught:
        build({**tiny_options, option: "nobody/not-cached"}, BuildContext(section="$.reward[1]"))
    assert f"$.reward[1].options.{option} = 'nobody/not-cached' cannot be loaded" in caught.value.message
    assert "hf download nobody/not-cached" in caught.value.message and "\n" not in caught.value.message


def test_a_model_that_fails_to_load_is_still_a_config_error_naming_the_option(
    tiny_options: dict[str, Any], batch: Any, tmp_path: Path
) -> None:
    """A directory with the files a model has, but not loadable, passes the build-time check and fails at the first
    call with the option named (the loading path every failure the check cannot foresee takes)."""
    broken = tmp_path / "broken"
    broken.mkdir()
    for name in ("config.json", "model.safetensors", "preprocessor_config.json"):
        (broken / name).write_text("not json", encoding="utf-8")
    reward = build({**tiny_options, "detector": str(broken)}, BuildContext(section="$.reward[0]"))
    images, prompts, metadata = batch
    with pytest.raises(ConfigError, match=r"\$\.reward\[0\]\.options\.detector"):
        reward(images[:1], prompts[:1], metadata[:1])


def test_a_local_path_that_does_not_exist_fails_at_build_time(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"options\.detector"):
        build({"detector": str(tmp_path / "no" / "such")})


@pytest.mark.slow  # ~45 s on 2 CPU cores (Ray start-up, torch + transformers imported in the actor)
def test_the_reward_in_a_ray_reward_actor(tiny_options: dict[str, Any], batch: Any) -> None:
    """``resources = {CPU = 1}``: the reward is built and scores in its own actor, as it would on a GPU."""
    from omni_rl.rewards.combined import CombinedReward
    from omni_rl.testing.ray import local_ray

    images, prompts, metadata = batch
    section = ResolvedComponent(
        kind="reward", name="geneval", spec=SPEC, options=structure_options(SPEC, tiny_options), resources={"CPU": 1}
    )
    with local_ray(num_cpus=2):
        combined = CombinedReward([section], BuildContext())
        try:
            combined.start()
            scored = combined(images, prompts, metadata)
        finally:
            combined.close()
    np.testing.assert_allclose(scored.scores["geneval"], build(tiny_options)(images, prompts, metadata).scores)
    assert np.isfinite(scored.metrics()["reward/geneval/counting"])


class TestGenEvalReward(RewardConformance):
    @pytest.fixture
    def spec(self) -> RewardSpec:
        return SPEC

    @pytest.fixture
    def options(self, tiny_options: dict[str, Any]) -> dict[str, Any]:
        return tiny_options

    @pytest.fixture
    def metadata(self, images: np.ndarray) -> list[dict[str, Any]]:
        records = evaluation_prompts()
        return [records[PICK[i % len(PICK)]].metadata for i in range(len(images))]


class TestGenEvalBenchmark(BenchmarkConformance):
    """The benchmark on the tiny models; the default ``records`` spread over the 553 prompts like ``--limit``."""

    @pytest.fixture
    def spec(self) -> BenchmarkSpec:
        (spec,) = omni_rl_benchmarks()
        return spec

    @pytest.fixture
    def options(self, tiny_options: dict[str, Any]) -> dict[str, Any]:
        return tiny_options


class TestHooks(PluginConformance):
    heavy_modules = (*PluginConformance.heavy_modules, "huggingface_hub", "PIL", "scipy")

    @pytest.fixture
    def hooks_module(self) -> str:
        return "omni_rl_geneval.hooks"
