"""FluxModel against FluxPipeline itself: prompt encoding, schedules (dev's dynamic shift, schnell's none), the
two guidance modes and their transformer-call counts, and full samples equal to the pipeline's."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from flux_helpers import NEGATIVE, PROMPTS, SIZE, build_model, euler_sample, load_pipe, pipe_sample
from omni_rl_flux.latents import image_ids, pack, unpack

from omni_rl.errors import ConfigError


def test_pack_is_the_pipelines_and_unpack_inverts_it(base_pipe) -> None:
    x = torch.randn(2, 16, 8, 6)
    torch.testing.assert_close(pack(x), base_pipe._pack_latents(x, 2, 16, 8, 6), rtol=0, atol=0)
    torch.testing.assert_close(unpack(pack(x), 8, 6), x, rtol=0, atol=0)
    expected = base_pipe._prepare_latent_image_ids(1, 4, 3, "cpu", torch.float32)
    torch.testing.assert_close(image_ids(8, 6, device=torch.device("cpu"), dtype=torch.float32), expected)


def test_prompts_are_the_pipelines_embeddings(flux_model, base_pipe) -> None:
    conditioning = flux_model.encode_prompts(PROMPTS[:2], guidance_scale=4.0)  # one prompt at a time: 1e-5 below
    embeds, pooled, _ = base_pipe.encode_prompt(PROMPTS[:2], prompt_2=None, max_sequence_length=512)
    torch.testing.assert_close(
        conditioning.tensors["prompt_embeds"], embeds, rtol=0, atol=1e-5
    )  # batched vs one at a time
    torch.testing.assert_close(conditioning.tensors["pooled_prompt_embeds"], pooled, rtol=0, atol=1e-5)
    assert conditioning.tensors["prompt_embeds"].shape[1] == 512  # padded to max_sequence_length, as the pipeline
    negative, negative_pooled, _ = base_pipe.encode_prompt([NEGATIVE] * 2, prompt_2=None, max_sequence_length=512)
    torch.testing.assert_close(conditioning.tensors["negative_prompt_embeds"], negative, rtol=0, atol=1e-5)
    torch.testing.assert_close(conditioning.tensors["negative_pooled_prompt_embeds"], negative_pooled)


def test_dev_schedule_uses_the_resolution_dependent_shift(flux_model) -> None:
    small, large = flux_model.sigma_schedule(4, 32, 32), flux_model.sigma_schedule(4, 64, 64)
    assert small[0] == 1.0 and small[-1] == 0.0
    assert bool((large[1:-1] > small[1:-1]).all())  # more image tokens, larger mu, noisier middle steps


@pytest.mark.parametrize("cfg", [1.0, 4.0])
@pytest.mark.parametrize("guidance", [3.5, 5.0])
def test_euler_rollout_equals_the_pipeline(tiny_flux_path: Path, base_pipe, cfg: float, guidance: float):
    """Distilled guidance and classic CFG on top (both halves in the step's one call, where the pipeline makes
    two), both as FluxPipeline computes them."""
    model = build_model(tiny_flux_path, guidance=guidance)
    before = model.transformer_calls
    latents, images = euler_sample(model, PROMPTS[0], steps=3, cfg=cfg, seed=7)
    assert model.transformer_calls - before == 3
    expected_latents, expected_images = pipe_sample(base_pipe, PROMPTS[0], steps=3, cfg=cfg, seed=7, guidance=guidance)
    torch.testing.assert_close(pack(latents), expected_latents, rtol=0, atol=1e-5)
    assert (images.int() - expected_images.int()).abs().max() <= 1


def test_guidance_changes_the_velocity(tiny_flux_path: Path, flux_model) -> None:
    other = build_model(tiny_flux_path, guidance=1.0)
    assert flux_model.guidance == 3.5 and other.guidance == 1.0
    a, _ = euler_sample(flux_model, PROMPTS[1], steps=2, cfg=1.0, seed=1)
    b, _ = euler_sample(other, PROMPTS[1], steps=2, cfg=1.0, seed=1)
    assert not torch.allclose(a, b)


def test_schnell_has_no_guidance_embedding_no_shift_and_matches_its_pipeline(tiny_schnell_path: Path) -> None:
    model = build_model(tiny_schnell_path, max_sequence_length=256)
    assert model.guidance is None
    torch.testing.assert_close(model.sigma_schedule(4, SIZE, SIZE), torch.tensor([1.0, 0.75, 0.5, 0.25, 0.0]))
    latents, _ = euler_sample(model, PROMPTS[2], steps=4, cfg=1.0, seed=3)
    pipe = load_pipe(tiny_schnell_path)
    expected = pipe(
        PROMPTS[2],
        guidance_scale=0.0,
        num_inference_steps=4,
        max_sequence_length=256,
        generator=torch.Generator().manual_seed(3),
        height=SIZE,
        width=SIZE,
        output_type="latent",
    ).images
    torch.testing.assert_close(pack(latents), expected, rtol=0, atol=1e-5)
    with pytest.raises(ConfigError, match="guidance embeddings") as error:
        build_model(tiny_schnell_path, guidance=3.5)
    assert "cfg" in error.value.hint


def test_bad_sizes_and_paths_are_config_errors(flux_model, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="multiples of 8"):
        flux_model.latent_shape(36, 32)
    with pytest.raises(ConfigError, match="does not exist"):
        build_model(tmp_path / "missing")
    (tmp_path / "model_index.json").write_text('{"_class_name": "StableDiffusion3Pipeline"}')
    with pytest.raises(ConfigError, match="not a FluxPipeline"):
        build_model(tmp_path)


def test_encode_images_inverts_decode_up_to_the_vae(flux_model) -> None:
    latents = torch.randn(1, *flux_model.latent_shape(SIZE, SIZE), generator=torch.Generator().manual_seed(0))
    images = flux_model.decode(latents)
    encoded = flux_model.encode_images(images)
    assert encoded.shape == latents.shape and encoded.dtype == torch.float32
