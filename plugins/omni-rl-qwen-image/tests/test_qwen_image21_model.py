"""The ``qwen_image21`` model against QwenImage21Pipeline itself: prompt embeddings, the ODE rollout with and
without CFG, the published sigma grid, batch independence, gradients and error messages."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from qwen_image21_helpers import PROMPTS, SIZE, build_model21, euler21, load_pipe21, pipe21_sample

from omni_rl import build
from omni_rl.errors import ConfigError, RuntimeFailure
from omni_rl.protocols import DiffusionModel, RolloutRequest


def test_factory_builds_a_diffusion_model(q21_model) -> None:
    assert isinstance(q21_model, DiffusionModel)
    assert q21_model.latent_shape(SIZE, SIZE) == (16, 4, 4)
    assert len(q21_model.fsdp_units()) == 2


def test_prompt_embeddings_are_the_pipelines(q21_model, tiny_q21_path: Path) -> None:
    pipe = load_pipe21(tiny_q21_path)
    conditioning = q21_model.encode_prompts(PROMPTS, guidance_scale=4.0)
    for i, prompt in enumerate(PROMPTS):
        expected, mask, image_pad = pipe.encode_prompt([prompt], device="cpu")
        assert mask is None and not bool(image_pad.any())
        n = int(conditioning.tensors["prompt_embeds_mask"][i].sum())
        torch.testing.assert_close(conditioning.tensors["prompt_embeds"][i, :n], expected[0])
    negative, _, _ = pipe.encode_prompt([" "], device="cpu")
    torch.testing.assert_close(conditioning.tensors["negative_prompt_embeds"][0, : negative.shape[1]], negative[0])
    assert "negative_prompt_embeds" not in q21_model.encode_prompts(PROMPTS, guidance_scale=1.0).tensors


@pytest.mark.parametrize("cfg", [1.0, 4.0], ids=["no_cfg", "cfg"])
def test_ode_rollout_equals_the_pipeline(q21_model, tiny_q21_path: Path, cfg: float) -> None:
    """The diffusers rollout's ODE sampling (prompts of three lengths in one batch) against the pipeline's own
    ``__call__`` (KV cache on, its default) on each prompt alone, within 1 level."""
    prompts, seeds = [PROMPTS[0], PROMPTS[0], PROMPTS[1], PROMPTS[2]], [3, 4, 5, 6]
    options = {"group_size": 1, "steps": 3, "eval_steps": 3, "height": SIZE, "width": SIZE, "cfg": cfg}
    backend = build("rollout", "diffusers", {**options, "batch_size": 4})
    request = RolloutRequest(prompts=prompts, group_ids=[0, 1, 2, 3], seeds=seeds, step=1, mode="eval", run_seed=0)
    batch = backend.generate(q21_model, build("sampler", "ode", {}), request)
    pipe = load_pipe21(tiny_q21_path)
    for k in (0, 2, 3):
        images = pipe21_sample(pipe, prompts[k], steps=3, cfg=cfg, seed=seeds[k])
        assert (batch.images[k].int() - images[0].int()).abs().max() <= 1


def test_cfg_is_the_pipelines_plain_combination(q21_model) -> None:
    """neg + s (pos - neg) without Qwen-Image's norm rescaling, each sample as alone, one call per prompt length."""
    latents = torch.randn((3, 16, 4, 4), generator=torch.Generator().manual_seed(0))
    sigmas = torch.tensor([0.9, 0.5, 0.3])
    with torch.no_grad():
        both = q21_model.encode_prompts(PROMPTS, guidance_scale=4.0)
        before = q21_model.transformer_calls
        guided = q21_model.predict_velocity(latents, sigmas, both, 4.0)
        assert q21_model.transformer_calls - before == 4  # three prompt lengths and the negative
        pos = q21_model.predict_velocity(latents, sigmas, both, 1.0)
        neg_only = q21_model.encode_prompts([" "] * 3, guidance_scale=1.0)
        neg = q21_model.predict_velocity(latents, sigmas, neg_only, 1.0)
        alone = q21_model.predict_velocity(
            latents[1:2], sigmas[1:2], q21_model.encode_prompts(PROMPTS[1:2], guidance_scale=4.0), 4.0
        )
    torch.testing.assert_close(guided, neg + 4.0 * (pos - neg), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(guided[1:2], alone, rtol=1e-5, atol=1e-5)
    assert (guided - pos).abs().max() > 1e-3


def test_published_sample_sigmas_are_used_at_their_step_count(tmp_path: Path) -> None:
    from omni_rl_qwen_image.qwen21_schedule import qwen_image21_sigmas
    from omni_rl_qwen_image.qwen21_tiny import build_tiny_qwen_image21_pipeline

    grid = (1.0, 0.8, 0.5, 0.2)
    path = build_tiny_qwen_image21_pipeline(tmp_path / "sigmas", seed=1, sample_sigmas=grid)
    model = build_model21(path)
    pipe = load_pipe21(path)
    ours, theirs = (
        euler21(model, PROMPTS[1], steps=4, cfg=1.0, seed=2),
        pipe21_sample(pipe, PROMPTS[1], steps=4, cfg=1.0, seed=2),
    )
    assert (ours.int() - theirs.int()).abs().max() <= 1
    linear = qwen_image21_sigmas(model.pipeline.scheduler, 4, 4, 4, sample_sigmas=None)
    assert not torch.allclose(model.sigma_schedule(4, SIZE, SIZE), linear)  # the published grid, not linspace
    # another step count: linspace(1, 1/n, n), as the pipeline gives for those sigmas
    n3 = pipe21_sample(pipe, PROMPTS[1], steps=3, cfg=1.0, seed=2, sigmas=[1.0, 2 / 3, 1 / 3])
    assert (euler21(model, PROMPTS[1], steps=3, cfg=1.0, seed=2).int() - n3.int()).abs().max() <= 1


def test_gradients_reach_only_the_lora_weights(tiny_q21_path: Path) -> None:
    model = build_model21(tiny_q21_path)
    conditioning = model.encode_prompts(PROMPTS[:2], guidance_scale=4.0)
    with torch.no_grad():
        for p in model.trainable_parameters():
            p.normal_(0, 0.01)
    model.predict_velocity(
        torch.randn((2, 16, 4, 4)), torch.tensor([0.7, 0.4]), conditioning, 4.0
    ).square().mean().backward()
    trained = {id(p) for p in model.trainable_parameters()}
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.trainable_parameters())
    assert all(p.grad is None for p in model.transformer.parameters() if id(p) not in trained)


def test_encode_images_is_the_pipelines_condition_encoding(q21_model) -> None:
    images = torch.randint(0, 256, (1, SIZE, SIZE, 3), dtype=torch.uint8)
    latents = q21_model.encode_images(images)
    assert latents.shape == (1, 16, 4, 4)
    decoded = q21_model.decode(latents)
    assert decoded.shape == (1, SIZE, SIZE, 3) and decoded.dtype == torch.uint8


def test_errors_say_what_to_change(q21_model, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="multiples of 32"):
        q21_model.latent_shape(48, 64)
    with pytest.raises(RuntimeFailure, match="negative_prompt_embeds"):
        q21_model.predict_velocity(
            torch.zeros((1, 16, 4, 4)), torch.tensor([0.5]), q21_model.encode_prompts(["a"], guidance_scale=1.0), 4.0
        )
    with pytest.raises(ConfigError, match="does not exist"):
        build_model21(tmp_path / "missing")
