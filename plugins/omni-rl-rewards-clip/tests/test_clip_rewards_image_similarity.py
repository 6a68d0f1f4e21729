"""``image_similarity`` (issue 49): the cosine of the output's and the source's image embeddings, CLIP (full or
vision-only checkpoints) or DINOv2, checked against embeddings computed here through transformers' own modules;
identical images score 1, sources are embedded once per distinct image, and a batch without sources, a
checkpoint of the other family and a text-only run are refused with the fix named."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from clip_tiny_models import build_reward
from omni_rl_rewards_clip.checks import source_reward_check
from PIL import Image
from transformers import AutoConfig, AutoImageProcessor, CLIPModel, CLIPVisionModelWithProjection, Dinov2Model

from omni_rl import get_registry, load_config
from omni_rl.config import structure_options
from omni_rl.config.schema import ResolvedComponent
from omni_rl.errors import ConfigError
from omni_rl.rewards.combined import CombinedReward
from omni_rl.rewards.frames import call_reward
from omni_rl.specs import ModelSpec

QUICKSTART = Path(__file__).parents[3] / "docs" / "examples" / "quickstart.toml"
RNG = np.random.default_rng(11)
OUTPUTS = RNG.integers(0, 256, size=(4, 40, 40, 3), dtype=np.uint8)
#: sources of another size than the outputs, as an edit's usually are
SOURCES = [RNG.integers(0, 256, size=(48, 36, 3), dtype=np.uint8) for _ in range(3)]
PROMPTS = ["make it blue", "make it blue", "add a square", "add a square"]


@pytest.fixture(params=["clip", "clip_vision", "dino"])
def encoder(request: pytest.FixtureRequest) -> tuple[str, Path]:
    """(backbone, checkpoint directory) of each encoder family the reward loads."""
    name = request.param
    directory = request.getfixturevalue(
        {"clip": "tiny_clip_dir", "clip_vision": "tiny_clip_vision_dir"}.get(name, "tiny_dinov2_dir")
    )
    return ("dino" if name == "dino" else "clip"), directory


def _reward(encoder: tuple[str, Path], **options: Any) -> Any:
    backbone, directory = encoder
    return build_reward("image_similarity", {"backbone": backbone, "model": str(directory), **options})


def _expected_embeddings(encoder: tuple[str, Path], images: list[np.ndarray]) -> np.ndarray:
    """Unit embeddings computed here: CLIP's vision tower then its projection by hand, or Dinov2Model's
    pooler_output (the reward reads the CLS token of last_hidden_state instead)."""
    backbone, directory = encoder
    pixels = AutoImageProcessor.from_pretrained(directory)(
        images=[Image.fromarray(image) for image in images], return_tensors="pt"
    )["pixel_values"]
    with torch.no_grad():
        if backbone == "dino":
            features = Dinov2Model.from_pretrained(directory).eval()(pixel_values=pixels).pooler_output
        elif AutoConfig.from_pretrained(directory).model_type == "clip_vision_model":
            model = CLIPVisionModelWithProjection.from_pretrained(directory).eval()
            features = model.visual_projection(model.vision_model(pixel_values=pixels).pooler_output)
        else:
            model = CLIPModel.from_pretrained(directory).eval()
            features = model.visual_projection(model.vision_model(pixel_values=pixels).pooler_output)
    array = features.double().numpy()
    return array / np.linalg.norm(array, axis=1, keepdims=True)


def test_an_unedited_output_scores_1(encoder: tuple[str, Path]) -> None:
    reward = _reward(encoder)
    conditions = [(OUTPUTS[k].copy(),) for k in range(4)]
    np.testing.assert_allclose(call_reward(reward, OUTPUTS, PROMPTS, [{}] * 4, conditions).scores, 1.0, atol=1e-5)


def test_the_score_is_the_cosine_of_the_embeddings(encoder: tuple[str, Path]) -> None:
    reward = _reward(encoder, batch_size=3)
    conditions = [(SOURCES[0],), (SOURCES[0],), (SOURCES[1],), (SOURCES[2],)]
    scores = call_reward(reward, OUTPUTS, PROMPTS, [{}] * 4, conditions).scores
    outputs = _expected_embeddings(encoder, list(OUTPUTS))
    sources = _expected_embeddings(encoder, [SOURCES[0], SOURCES[0], SOURCES[1], SOURCES[2]])
    np.testing.assert_allclose(scores, (outputs * sources).sum(axis=1), atol=1e-5)
    assert (scores < 1 - 1e-3).all()  # other images than their sources: below the unedited output's 1
    assert np.ptp(scores) > 1e-4


def test_mean_compares_with_every_source_and_first_with_the_first(tiny_dinov2_dir: Path) -> None:
    encoder = ("dino", tiny_dinov2_dir)
    conditions = [(SOURCES[0], SOURCES[1]), (SOURCES[2],), (SOURCES[1], SOURCES[2], SOURCES[0]), (SOURCES[0],)]
    outputs = _expected_embeddings(encoder, list(OUTPUTS))
    sources = _expected_embeddings(encoder, SOURCES)
    cosines = outputs @ sources.T  # (output, source)
    first = call_reward(_reward(encoder), OUTPUTS, PROMPTS, [{}] * 4, conditions).scores
    mean = call_reward(_reward(encoder, source_images="mean"), OUTPUTS, PROMPTS, [{}] * 4, conditions).scores
    np.testing.assert_allclose(first, [cosines[0, 0], cosines[1, 2], cosines[2, 1], cosines[3, 0]], atol=1e-5)
    expected = [cosines[0, [0, 1]].mean(), cosines[1, 2], cosines[2, [1, 2, 0]].mean(), cosines[3, 0]]
    np.testing.assert_allclose(mean, expected, atol=1e-5)


def test_a_shared_source_is_embedded_once_and_chunks_do_not_change_scores(tiny_clip_dir: Path) -> None:
    conditions = [(SOURCES[0],), (SOURCES[0].copy(),), (SOURCES[1],), (SOURCES[1],)]  # two groups of two
    reward = _reward(("clip", tiny_clip_dir), batch_size=2)
    embedded: list[int] = []
    real = type(reward.loaded).embeddings

    def counting(loaded: Any, images: list[Any]) -> Any:
        embedded.append(len(images))
        return real(loaded, images)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(type(reward.loaded), "embeddings", counting)
        chunked = call_reward(reward, OUTPUTS, PROMPTS, [{}] * 4, conditions).scores
    assert sum(embedded) == 4 + 2 and max(embedded) <= 2  # 4 outputs, 2 distinct sources, 2 a forward pass
    whole = call_reward(_reward(("clip", tiny_clip_dir), batch_size=16), OUTPUTS, PROMPTS, [{}] * 4, conditions)
    np.testing.assert_allclose(chunked, whole.scores, atol=1e-6)


def test_a_batch_without_sources_says_what_to_do(tiny_clip_dir: Path) -> None:
    reward = _reward(("clip", tiny_clip_dir))
    with pytest.raises(ValueError, match=r"sample 0 has none \(a text-only batch; .*`image` or `images` field"):
        reward(OUTPUTS, PROMPTS, [{}] * 4)  # called without conditions
    with pytest.raises(ValueError, match=r"sample 2 has none .*options\.send_conditions = true"):
        reward(OUTPUTS, PROMPTS, [{}] * 4, conditions=[(SOURCES[0],), (SOURCES[0],), (), ()])
    assert reward._loaded is None  # refused before the model is loaded
    # in a run, the combined reward reports it on one line naming the reward
    section = _section(tiny_clip_dir)
    with pytest.raises(Exception, match=r"reward 'image_similarity' failed: ValueError: image_similarity compares"):
        CombinedReward([section], None)(OUTPUTS, PROMPTS, [{}] * 4)


def test_a_checkpoint_of_the_other_family_names_the_backbone_option(tiny_clip_dir: Path, tiny_dinov2_dir: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        _reward(("dino", tiny_clip_dir)).load()
    assert "is a 'clip' model, which the 'dino' backbone does not load" in caught.value.message
    assert '$.reward[].options.backbone = "clip"' in str(caught.value.hint)
    with pytest.raises(ConfigError, match="is a 'dinov2' model, which the 'clip' backbone"):
        _reward(("clip", tiny_dinov2_dir)).load()


def test_defaults_and_pickling(tiny_dinov2_dir: Path) -> None:
    spec = get_registry().find("reward", "image_similarity")
    assert spec is not None
    assert structure_options(spec.spec, {}).model == "openai/clip-vit-large-patch14"  # flow_grpo's encoder
    assert structure_options(spec.spec, {"backbone": "dino"}).model == "facebook/dinov2-base"
    reward = _reward(("dino", tiny_dinov2_dir))
    call_reward(reward, OUTPUTS[:1], PROMPTS[:1], [{}], [(SOURCES[0],)])
    assert reward.loaded is not None and pickle.loads(pickle.dumps(reward))._loaded is None  # weights never shipped


def _section(directory: Path, name: str = "image_similarity", path: str = "$.reward[0]") -> ResolvedComponent:
    found = get_registry().find("reward", name)
    assert found is not None
    options = structure_options(found.spec, {"model": str(directory)})
    return ResolvedComponent(kind="reward", name=name, spec=found.spec, options=options, path=path)


def test_a_text_only_run_is_refused_before_it_starts(tiny_clip_dir: Path) -> None:
    option = f'{{model = "{tiny_clip_dir}"}}'
    sets = ['reward.0.name="image_similarity"', f"reward.0.options={option}"]
    sets += ['reward.1.name="image_similarity"', f"reward.1.options={option}", "reward.1.weight=0.5"]
    with pytest.raises(ConfigError) as caught:
        load_config(QUICKSTART, sets)
    text = str(caught.value)
    for k in (0, 1):  # each section named once
        assert text.count(f"@ $.reward[{k}].name") == 1
    assert "the 'qwen_image' model takes no condition images" in text and "docs/editing.md" in text
    # an editing model's spec takes it
    editing = ModelSpec(name="edit_model", factory=lambda c, x: None, condition_images=(1, 1))
    model = ResolvedComponent(kind="model", name="edit_model", spec=editing, options=None, path="$.model")
    assert source_reward_check({"model": model, "reward[0]": _section(tiny_clip_dir)}) == []
