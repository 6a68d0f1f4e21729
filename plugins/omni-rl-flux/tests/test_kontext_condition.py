"""The condition of ``flux_kontext``: how a source is sized (``condition_max_area`` / ``condition_resize``), that its
tokens and ids are the pipeline's own, and that wrong input is refused with one clear line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from kontext_helpers import build_kontext, kontext_spec, source
from omni_rl_flux.kontext import CONDITION_LATENTS, CONDITION_SIZE
from omni_rl_flux.kontext_condition import condition_ids, condition_size

from omni_rl.config import structure_options
from omni_rl.errors import ConfigError, RuntimeFailure


def test_a_source_within_the_area_keeps_its_size_floored_to_whole_patches() -> None:
    """As ``FluxKontextPipeline.__call__(_auto_resize=False)``: the image processor's floor to 2 x the VAE factor."""
    assert condition_size(512, 512, max_area=1024**2, multiple=16, resize="area") == (512, 512)
    assert condition_size(517, 770, max_area=1024**2, multiple=16, resize="area") == (512, 768)
    assert condition_size(5, 30, max_area=1024**2, multiple=16, resize="area") == (16, 16)  # one patch at least


def test_a_larger_source_is_downscaled_to_the_area_with_its_aspect_kept() -> None:
    height, width = condition_size(1536, 2048, max_area=512 * 512, multiple=16, resize="area")
    assert height * width <= 512 * 512 and height % 16 == 0 and width % 16 == 0
    assert (height, width) == (432, 576)  # round(sqrt(A * 4/3)) = 591 -> 576, round(sqrt(A * 3/4)) = 443 -> 432
    assert abs(width / height - 2048 / 1536) < 0.02


def test_kontext_resolutions_is_the_pipelines_snap() -> None:
    """``_auto_resize``: the preferred resolution nearest in aspect ratio, whatever the source's size."""
    assert condition_size(64, 64, max_area=256, multiple=16, resize="kontext_resolutions") == (1024, 1024)
    assert condition_size(400, 600, max_area=256, multiple=16, resize="kontext_resolutions") == (832, 1248)
    assert condition_size(1500, 700, max_area=256, multiple=16, resize="kontext_resolutions") == (1504, 688)


def test_the_conditioning_holds_the_pipelines_condition_tokens_and_ids(kontext_model, kontext_pipe) -> None:
    """``FluxKontextPipeline.prepare_latents`` on the image its ``__call__`` preprocesses (``_auto_resize=False``)
    gives the tokens and ids the model stores and appends."""
    from PIL import Image

    image = source(41, 50, seed=3)  # floored to 40 x 48 by both
    pil = Image.fromarray(image)
    processor = kontext_pipe.image_processor
    height, width = processor.get_default_height_width(pil)
    pixels = processor.preprocess(processor.resize(pil, height, width), height, width)
    _, expected, _, expected_ids = kontext_pipe.prepare_latents(
        pixels, 1, 16, 32, 32, torch.float32, torch.device("cpu"), torch.Generator().manual_seed(0)
    )
    conditioning = kontext_model.encode_conditions(["make it red"], [(image,)], guidance_scale=1.0)
    assert conditioning.tensors[CONDITION_SIZE].tolist() == [[height // 4, width // 4]]
    torch.testing.assert_close(conditioning.tensors[CONDITION_LATENTS], expected, rtol=0, atol=0)
    torch.testing.assert_close(condition_ids(10, 12, device=torch.device("cpu"), dtype=torch.float32), expected_ids)


def test_sources_of_different_sizes_are_padded_and_each_keeps_its_size(kontext_model) -> None:
    conditioning = kontext_model.encode_conditions(
        ["a", "b"], [(source(32, 32),), (source(48, 40),)], guidance_scale=1.0
    )
    assert conditioning.tensors[CONDITION_SIZE].tolist() == [[8, 8], [12, 10]]
    tokens = conditioning.tensors[CONDITION_LATENTS]
    assert tokens.shape == (2, 30, 64)
    assert torch.all(tokens[0, 16:] == 0) and not torch.all(tokens[1, 16:] == 0)  # the first is padded


def test_condition_max_area_downscales_what_is_encoded(tiny_kontext_path: Path) -> None:
    model = build_kontext(tiny_kontext_path, condition_max_area=24 * 24)
    conditioning = model.encode_conditions(["a"], [(source(48, 40),)], guidance_scale=1.0)
    # 48 x 40 > 576 px: round(sqrt(576 * 40/48)) = 22 -> 16 wide, round(sqrt(576 * 48/40)) = 26 -> 24 high
    assert model.condition_size(48, 40) == (24, 16)
    assert conditioning.tensors[CONDITION_SIZE].tolist() == [[6, 4]]


@pytest.mark.parametrize(
    ("sources", "match"),
    [
        ((), "exactly one condition image"),
        ((source(32, 32), source(32, 32)), "exactly one condition image"),
        ((np.zeros((32, 32, 3), dtype=np.float32),), "uint8"),
        ((np.zeros((32, 32), dtype=np.uint8),), "uint8"),
    ],
    ids=["none", "two", "float", "grey"],
)
def test_wrong_condition_images_are_refused(kontext_model, sources: tuple, match: str) -> None:
    with pytest.raises(RuntimeFailure, match=match):
        kontext_model.encode_conditions(["make it red"], [sources], guidance_scale=1.0)


def test_text_only_conditioning_is_refused_by_the_velocity(kontext_model) -> None:
    conditioning = kontext_model.encode_prompts(["make it red"], guidance_scale=1.0)
    with pytest.raises(RuntimeFailure, match="source image"):
        kontext_model.predict_velocity(torch.zeros(1, 16, 8, 8), torch.ones(1), conditioning, 1.0)


@pytest.mark.parametrize(
    ("options", "path"),
    [
        ({"condition_max_area": 100}, "$.model.options.condition_max_area"),
        ({"condition_resize": "snap"}, "$.model.options.condition_resize"),
    ],
)
def test_bad_condition_options_are_config_errors(options: dict, path: str) -> None:
    with pytest.raises(ConfigError) as error:
        structure_options(kontext_spec(), {"path": "models/kontext", **options})
    assert path in str(error.value)


def test_a_text_to_image_flux_directory_is_refused(tiny_flux_path: Path) -> None:
    with pytest.raises(ConfigError, match="holds a FluxPipeline, not a FluxKontextPipeline"):
        build_kontext(tiny_flux_path)
