"""hpsv2 equals open_clip's forward of the checkpoint; aesthetic equals the published MLP on CLIP embeddings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from clip_tiny_models import HEADS, PublishedAestheticMLP, openclip_state_dict
from clip_tiny_models import build_reward as build
from omni_rl_rewards_clip.images import letterbox
from omni_rl_rewards_clip.openclip_keys import openclip_to_transformers
from openclip_reference import hps_scores
from PIL import Image
from transformers import CLIPModel, CLIPProcessor

from omni_rl.errors import ConfigError


def hps_options(processor: Path, checkpoint: Path, **extra: Any) -> dict[str, Any]:
    return {"model": str(checkpoint), "processor": str(processor), **extra}


def test_hpsv2_matches_the_open_clip_forward(
    tiny_processor_dir: Path, tiny_hps_file: Path, sample_images: np.ndarray, sample_prompts: list[str]
) -> None:
    """Square images: HPSv2's letterbox is then a plain resize, which the processor's own resize matches."""
    result = build("hpsv2", hps_options(tiny_processor_dir, tiny_hps_file))(sample_images, sample_prompts, [{}] * 5)
    processor = CLIPProcessor.from_pretrained(tiny_processor_dir)
    pixels = processor.image_processor(images=[Image.fromarray(i) for i in sample_images], return_tensors="pt")
    tokens = processor.tokenizer(sample_prompts, padding="max_length", max_length=77, return_tensors="pt")
    state = torch.load(tiny_hps_file, weights_only=True)["state_dict"]
    with torch.no_grad():
        expected = hps_scores(state, pixels["pixel_values"], tokens["input_ids"], HEADS).double().numpy()
    np.testing.assert_allclose(result.scores, expected, rtol=1e-4, atol=1e-5)
    assert len(set(np.round(result.scores, 6))) == 5  # the images really score differently


def test_hpsv2_accepts_a_directory_and_ddp_prefixes(
    tmp_path: Path, tiny_processor_dir: Path, tiny_hps_file: Path, sample_images: np.ndarray
) -> None:
    state = torch.load(tiny_hps_file, weights_only=True)["state_dict"]
    torch.save({f"module.{key}": value for key, value in state.items()}, tmp_path / "HPS_v2.1_compressed.pt")
    prompts = ["a"] * 5
    from_file = build("hpsv2", hps_options(tiny_processor_dir, tiny_hps_file))(sample_images, prompts, [{}] * 5)
    from_dir = build("hpsv2", hps_options(tiny_processor_dir, tmp_path))(sample_images, prompts, [{}] * 5)
    np.testing.assert_allclose(from_dir.scores, from_file.scores, rtol=1e-6)


def test_hpsv2_batches_give_the_same_scores(
    tiny_processor_dir: Path, tiny_hps_file: Path, sample_images: np.ndarray, sample_prompts: list[str]
) -> None:
    whole = build("hpsv2", hps_options(tiny_processor_dir, tiny_hps_file))(sample_images, sample_prompts, [{}] * 5)
    single = build("hpsv2", hps_options(tiny_processor_dir, tiny_hps_file, batch_size=1))
    ones = [single(sample_images[k : k + 1], sample_prompts[k : k + 1], [{}]).scores[0] for k in range(5)]
    np.testing.assert_allclose(ones, whole.scores, rtol=1e-5, atol=1e-6)


def test_hpsv2_rejects_a_checkpoint_of_another_shape(tmp_path: Path, tiny_processor_dir: Path) -> None:
    path = tmp_path / "wrong.pt"
    torch.save({"state_dict": openclip_state_dict(projection_dim=8)}, path)
    reward = build("hpsv2", hps_options(tiny_processor_dir, path))
    with pytest.raises(ConfigError, match=r"not an HPSv2 checkpoint"):
        reward(np.zeros((1, 32, 32, 3), dtype=np.uint8), ["a"], [{}])


def test_key_mapping_uses_every_tensor_once() -> None:
    state = openclip_state_dict()
    mapped = openclip_to_transformers(state)
    assert sum(t.numel() for t in mapped.values()) == sum(t.numel() for t in state.values())
    with pytest.raises(ValueError, match="no place for"):
        openclip_to_transformers({**state, "visual.extra_head.weight": torch.zeros(1)})


def test_letterbox_fits_the_longer_side_and_pads_with_black() -> None:
    image = Image.fromarray(np.full((20, 40, 3), 200, dtype=np.uint8))  # 40 wide, 20 high
    boxed = np.asarray(letterbox(image, 32))
    assert boxed.shape == (32, 32, 3)
    np.testing.assert_array_equal(boxed[:8], 0)  # (32 - 16) // 2 rows of padding on top
    np.testing.assert_array_equal(boxed[24:], 0)
    np.testing.assert_array_equal(boxed[8:24], 200)
    square = Image.fromarray(np.arange(64 * 64 * 3, dtype=np.uint8).reshape(64, 64, 3))
    expected = np.asarray(square.resize((32, 32), Image.Resampling.BICUBIC))
    np.testing.assert_array_equal(np.asarray(letterbox(square, 32)), expected)


def test_aesthetic_is_the_published_mlp_on_normalised_embeddings(
    tiny_clip_dir: Path, tiny_aesthetic_file: Path, sample_images: np.ndarray, sample_prompts: list[str]
) -> None:
    options = {"model": str(tiny_clip_dir), "predictor": str(tiny_aesthetic_file)}
    result = build("aesthetic", options)(sample_images, sample_prompts, [{}] * 5)
    model = CLIPModel.from_pretrained(tiny_clip_dir).eval()
    processor = CLIPProcessor.from_pretrained(tiny_clip_dir)
    mlp = PublishedAestheticMLP(16).eval()
    mlp.load_state_dict(torch.load(tiny_aesthetic_file, weights_only=True))
    inputs = processor(images=[Image.fromarray(i) for i in sample_images], text=sample_prompts, return_tensors="pt",
                       padding=True)  # fmt: skip
    with torch.no_grad():
        expected = mlp(model(**inputs).image_embeds).squeeze(-1).double().numpy()
    np.testing.assert_allclose(result.scores, expected, rtol=1e-5, atol=1e-6)
    chunked = build("aesthetic", {**options, "batch_size": 2})(sample_images, sample_prompts, [{}] * 5)
    np.testing.assert_allclose(chunked.scores, result.scores, rtol=1e-5, atol=1e-6)


def test_aesthetic_predictor_from_a_directory(
    tmp_path: Path, tiny_clip_dir: Path, tiny_aesthetic_file: Path, sample_images: np.ndarray
) -> None:
    (tmp_path / "aesthetic-model.pth").write_bytes(tiny_aesthetic_file.read_bytes())
    options = {"model": str(tiny_clip_dir), "predictor": str(tmp_path)}
    scores = build("aesthetic", options)(sample_images, ["a"] * 5, [{}] * 5).scores
    direct = build("aesthetic", {**options, "predictor": str(tiny_aesthetic_file)})(sample_images, ["a"] * 5, [{}] * 5)
    np.testing.assert_allclose(scores, direct.scores, rtol=1e-6)


def test_aesthetic_rejects_an_mlp_for_another_embedding_size(
    tmp_path: Path, tiny_clip_dir: Path, sample_images: np.ndarray
) -> None:
    path = tmp_path / "mlp768.pth"
    torch.save(PublishedAestheticMLP(768).state_dict(), path)
    reward = build("aesthetic", {"model": str(tiny_clip_dir), "predictor": str(path)})
    with pytest.raises(ConfigError, match=r"options\.predictor"):
        reward(sample_images[:1], ["a"], [{}])
