"""pickscore and clip_score equal their formulas computed from transformers' own CLIPModel forward.

The expected values come from ``CLIPModel.forward`` (its ``logits_per_image`` and normalised ``image_embeds`` /
``text_embeds``), a different code path from the reward's ``get_*_features`` calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from clip_tiny_models import build_reward as build
from PIL import Image
from transformers import CLIPModel, CLIPProcessor


def clip_forward(directory: Path, images: np.ndarray, prompts: list[str]) -> Any:
    model = CLIPModel.from_pretrained(directory).eval()
    processor = CLIPProcessor.from_pretrained(directory)
    inputs = processor(
        text=prompts,
        images=[Image.fromarray(image) for image in images],
        padding="max_length",
        truncation=True,
        max_length=77,
        return_tensors="pt",
    )
    with torch.no_grad():
        return model(**inputs)


def test_pickscore_is_the_scaled_logit(
    tiny_clip_dir: Path, sample_images: np.ndarray, sample_prompts: list[str]
) -> None:
    reward = build("pickscore", {"model": str(tiny_clip_dir), "processor": str(tiny_clip_dir)})
    result = reward(sample_images, sample_prompts, [{}] * 5)
    logits = clip_forward(tiny_clip_dir, sample_images, sample_prompts).logits_per_image.diagonal().double()
    np.testing.assert_allclose(result.scores, logits.numpy() / 26.0, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(result.details["cosine"], logits.numpy() / np.exp(3.1), rtol=1e-5, atol=1e-6)


def test_pickscore_scale_option(tiny_clip_dir: Path, sample_images: np.ndarray, sample_prompts: list[str]) -> None:
    options = {"model": str(tiny_clip_dir), "processor": str(tiny_clip_dir)}
    default = build("pickscore", options)(sample_images, sample_prompts, [{}] * 5).scores
    unscaled = build("pickscore", {**options, "scale": 1.0})(sample_images, sample_prompts, [{}] * 5).scores
    np.testing.assert_allclose(unscaled, 26.0 * default, rtol=1e-6)


@pytest.mark.parametrize(("factor", "clamp"), [(1.0, False), (2.5, True)])
def test_clip_score_and_clip_s(
    tiny_clip_dir: Path, sample_images: np.ndarray, sample_prompts: list[str], factor: float, clamp: bool
) -> None:
    prefix = "A photo depicts " if clamp else ""
    options = {"model": str(tiny_clip_dir), "factor": factor, "clamp_at_zero": clamp, "prompt_prefix": prefix}
    result = build("clip_score", options)(sample_images, sample_prompts, [{}] * 5)
    out = clip_forward(tiny_clip_dir, sample_images, [prefix + prompt for prompt in sample_prompts])
    cosine = (out.image_embeds * out.text_embeds).sum(-1).double().numpy()
    expected = factor * (np.maximum(cosine, 0.0) if clamp else cosine)
    np.testing.assert_allclose(result.scores, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(result.details["cosine"], cosine, rtol=1e-5, atol=1e-6)


def test_clip_s_clamps_negative_cosines(tiny_clip_dir: Path, sample_images: np.ndarray) -> None:
    """The random tiny model gives cosines of both signs; CLIP-S must turn the negative ones into 0."""
    prompts = [f"prompt number {k}" for k in range(5)]
    plain = build("clip_score", {"model": str(tiny_clip_dir)})(sample_images, prompts, [{}] * 5)
    clip_s = build("clip_score", {"model": str(tiny_clip_dir), "factor": 2.5, "clamp_at_zero": True})
    scores = clip_s(sample_images, prompts, [{}] * 5).scores
    np.testing.assert_allclose(scores, 2.5 * np.maximum(plain.scores, 0.0), rtol=1e-6)
    assert (scores >= 0).all()


@pytest.mark.parametrize("name", ["pickscore", "clip_score"])
def test_batch_size_does_not_change_scores(
    name: str, tiny_clip_dir: Path, sample_images: np.ndarray, sample_prompts: list[str]
) -> None:
    options: dict[str, Any] = {"model": str(tiny_clip_dir)}
    if name == "pickscore":
        options["processor"] = str(tiny_clip_dir)
    whole = build(name, {**options, "batch_size": 16})(sample_images, sample_prompts, [{}] * 5).scores
    chunked = build(name, {**options, "batch_size": 2})(sample_images, sample_prompts, [{}] * 5).scores
    one_by_one = build(name, {**options, "batch_size": 1})
    singles = [one_by_one(sample_images[k : k + 1], sample_prompts[k : k + 1], [{}]).scores[0] for k in range(5)]
    np.testing.assert_allclose(chunked, whole, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(singles, whole, rtol=1e-5, atol=1e-6)


def test_weights_load_once_per_instance(tiny_clip_dir: Path, sample_images: np.ndarray) -> None:
    reward = build("clip_score", {"model": str(tiny_clip_dir)})
    assert reward._loaded is None  # building does not load
    reward(sample_images[:1], ["a"], [{}])
    first = reward._loaded
    reward(sample_images[:2], ["a", "b"], [{}, {}])
    assert reward._loaded is first
    assert first.device == "cpu" and not first.model.training


def test_bfloat16_scores_close_to_float32(
    tiny_clip_dir: Path, sample_images: np.ndarray, sample_prompts: list[str]
) -> None:
    options = {"model": str(tiny_clip_dir)}
    full = build("clip_score", options)(sample_images, sample_prompts, [{}] * 5).scores
    half = build("clip_score", {**options, "dtype": "bfloat16"})(sample_images, sample_prompts, [{}] * 5).scores
    np.testing.assert_allclose(half, full, atol=0.05)


def test_rejects_float_images(tiny_clip_dir: Path) -> None:
    reward = build("clip_score", {"model": str(tiny_clip_dir)})
    with pytest.raises(ValueError, match="uint8"):
        reward(np.zeros((1, 8, 8, 3), dtype=np.float32), ["a"], [{}])
