"""The ``z_image`` model against ZImagePipeline itself: prompt embeddings, CFG with its normalisation and
truncation, the schedule, the VAE scaling, gradients and error messages."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from z_image_helpers import PROMPTS, SIZE, build_model, load_pipe, pipe_sample

from omni_rl.errors import ConfigError, RuntimeFailure
from omni_rl.protocols import DiffusionModel


def _euler(model, prompt: str, *, steps: int, guidance: float, seed: int) -> torch.Tensor:
    conditioning = model.encode_prompts([prompt], guidance_scale=guidance)
    sigmas = model.sigma_schedule(steps, SIZE, SIZE)
    x = torch.randn((1, *model.latent_shape(SIZE, SIZE)), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        for i in range(steps):
            x = x + model.predict_velocity(x, sigmas[i].expand(1), conditioning, guidance) * (sigmas[i + 1] - sigmas[i])
    return model.decode(x)


def test_factory_builds_a_diffusion_model(z_model) -> None:
    assert isinstance(z_model, DiffusionModel)
    assert z_model.latent_shape(SIZE, SIZE) == (16, 8, 8)
    assert len(z_model.fsdp_units()) == 4  # 1 noise refiner + 1 context refiner + 2 main layers


def test_prompt_embeddings_are_the_pipelines(z_model, tiny_z_path: Path) -> None:
    pipe = load_pipe(tiny_z_path)
    conditioning = z_model.encode_prompts(PROMPTS, guidance_scale=2.0)
    expected, negative = pipe.encode_prompt(PROMPTS, device="cpu", do_classifier_free_guidance=True)
    mask = conditioning.tensors["prompt_embeds_mask"]
    assert mask.sum(1).tolist() == [e.shape[0] for e in expected]
    for i, row in enumerate(expected):
        torch.testing.assert_close(conditioning.tensors["prompt_embeds"][i, : row.shape[0]], row)
    torch.testing.assert_close(conditioning.tensors["negative_prompt_embeds"][0, : negative[0].shape[0]], negative[0])
    assert "negative_prompt_embeds" not in z_model.encode_prompts(PROMPTS, guidance_scale=0.0).tensors


def test_guidance_changes_the_images(z_model) -> None:
    assert not torch.equal(
        _euler(z_model, PROMPTS[0], steps=2, guidance=0.0, seed=0),
        _euler(z_model, PROMPTS[0], steps=2, guidance=4.0, seed=0),
    )


def test_cfg_normalization_and_truncation_are_the_pipelines(tiny_z_path: Path) -> None:
    model = build_model(tiny_z_path, cfg_normalization=1.0, cfg_truncation=0.6)
    pipe = load_pipe(tiny_z_path)
    for prompt in PROMPTS[:2]:
        ours = _euler(model, prompt, steps=4, guidance=5.0, seed=2)
        theirs = pipe_sample(pipe, prompt, steps=4, guidance=5.0, seed=2, cfg_normalization=1.0, cfg_truncation=0.6)
        assert (ours.int() - theirs.int()).abs().max() <= 1
    # the options matter: without them the same guidance gives other images
    plain = pipe_sample(pipe, prompt, steps=4, guidance=5.0, seed=2)
    assert (plain.int() - theirs.int()).abs().max() > 1


def test_cfg_is_one_transformer_call_and_truncation_skips_the_negatives(tiny_z_path: Path) -> None:
    model = build_model(tiny_z_path, cfg_truncation=0.5)
    conditioning = model.encode_prompts(PROMPTS[:2], guidance_scale=3.0)
    latents = torch.randn((2, 16, 8, 8), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        before = model.transformer_calls
        mixed = model.predict_velocity(latents, torch.tensor([0.9, 0.2]), conditioning, 3.0)
        assert model.transformer_calls - before == 1
        alone = model.encode_prompts(PROMPTS[1:2], guidance_scale=3.0)
        late = model.predict_velocity(latents[1:], torch.tensor([0.2]), alone, 3.0)
        unguided = model.predict_velocity(latents[1:], torch.tensor([0.2]), alone, 0.0)
    torch.testing.assert_close(late, unguided)  # 1 - 0.2 > 0.5: truncated, the positive prediction alone
    torch.testing.assert_close(mixed[1:], late, rtol=1e-5, atol=1e-5)


def test_gradients_reach_only_the_lora_weights(tiny_z_path: Path) -> None:
    model = build_model(tiny_z_path)
    conditioning = model.encode_prompts(PROMPTS[:1], guidance_scale=2.0)
    latents = torch.randn((1, 16, 8, 8))
    with torch.no_grad():
        for p in model.trainable_parameters():
            p.normal_(0, 0.01)
    model.predict_velocity(latents, torch.tensor([0.7]), conditioning, 2.0).square().mean().backward()
    trained = {id(p) for p in model.trainable_parameters()}
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.trainable_parameters())
    assert all(p.grad is None for p in model.transformer.parameters() if id(p) not in trained)


def test_encode_images_inverts_decode_scaling(z_model) -> None:
    images = torch.randint(0, 256, (1, SIZE, SIZE, 3), dtype=torch.uint8)
    latents = z_model.encode_images(images)
    vae = z_model.vae
    z = vae.encode(z_model._pixels(images), return_dict=False)[0].mode()
    torch.testing.assert_close(latents / vae.config.scaling_factor + vae.config.shift_factor, z)


def test_errors_say_what_to_change(z_model, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="multiples of 8"):
        z_model.latent_shape(36, 32)
    with pytest.raises(RuntimeFailure, match="negative_prompt_embeds"):
        z_model.predict_velocity(
            torch.zeros((1, 16, 8, 8)), torch.tensor([0.5]), z_model.encode_prompts(["a"], guidance_scale=0.0), 2.0
        )
    with pytest.raises(ConfigError, match="does not exist"):
        build_model(tmp_path / "missing")
