"""QwenImageModel reproduces QwenImagePipeline: prompts, schedule, true CFG, Euler loop, decode; and batching."""

from __future__ import annotations

import pytest
import torch
from omni_rl_qwen_image.latents import pack, unpack
from omni_rl_qwen_image.prompts import stack_texts
from qwen_image_helpers import PROMPTS, SIZE, euler_sample, pipe_sample

from omni_rl.batch import Conditioning
from omni_rl.errors import ConfigError, RuntimeFailure
from omni_rl.protocols import DiffusionModel


def test_factory_builds_a_diffusion_model(qwen_model) -> None:
    assert isinstance(qwen_model, DiffusionModel)
    assert qwen_model.latent_shape(SIZE, SIZE) == (16, 8, 8)
    assert not any(p.requires_grad for p in qwen_model.vae.parameters())
    assert not any(p.requires_grad for p in qwen_model.pipeline.text_encoder.parameters())


def test_prompt_embeddings_are_the_pipelines(qwen_model, base_pipe) -> None:
    """Per prompt: the pipeline's own encode_prompt (template dropped); a batch is padded with a 0/1 mask."""
    conditioning = qwen_model.encode_prompts(PROMPTS[:2], guidance_scale=1.0)
    embeds, mask = conditioning.tensors["prompt_embeds"], conditioning.tensors["prompt_embeds_mask"]
    for i, prompt in enumerate(PROMPTS[:2]):
        expected, expected_mask = base_pipe.encode_prompt(prompt, device="cpu", max_sequence_length=512)
        assert expected_mask is None  # one prompt: no padding
        length = expected.shape[1]
        assert int(mask[i].sum()) == length and bool(mask[i, :length].all())
        torch.testing.assert_close(embeds[i, :length], expected[0], rtol=0, atol=0)
        assert not embeds[i, length:].any()
    assert mask[0].sum() != mask[1].sum()  # the prompts really differ in length
    # the template is gone: "a dog" is 2 tokens + <|im_end|>, \n, <|im_start|>, assistant, \n
    assert int(mask[1].sum()) == 7


@pytest.mark.parametrize("guidance", [4.0, 1.0])
def test_euler_loop_matches_the_pipeline(qwen_model, base_pipe, guidance: float) -> None:
    latents, images = euler_sample(qwen_model, PROMPTS[0], steps=3, guidance=guidance, seed=7)
    ref_latents, ref_images = pipe_sample(base_pipe, PROMPTS[0], steps=3, guidance=guidance, seed=7)
    torch.testing.assert_close(pack(latents), ref_latents, rtol=0, atol=1e-5)
    assert images.dtype == torch.uint8 and images.shape == (1, SIZE, SIZE, 3)
    assert (images.int() - ref_images.int()).abs().max() <= 1


@pytest.mark.parametrize("guidance", [1.0, 4.0])
def test_prompts_of_different_lengths_batch_like_single_samples(qwen_model, guidance: float) -> None:
    """Each prompt encoded alone and concatenated (as the rollout does) or encoded together: the velocity of
    every sample is the one it gets alone, whatever the padding."""
    parts = [qwen_model.encode_prompts([p], guidance_scale=guidance) for p in PROMPTS]
    together = Conditioning.concat(parts)
    x = torch.randn(3, 16, 8, 8, generator=torch.Generator().manual_seed(0))
    sigmas = torch.tensor([0.9, 0.6, 0.3])
    both = qwen_model.predict_velocity(x, sigmas, together, guidance)
    encoded = qwen_model.predict_velocity(
        x, sigmas, qwen_model.encode_prompts(PROMPTS, guidance_scale=guidance), guidance
    )
    assert both.dtype == torch.float32 and both.shape == x.shape
    for i, part in enumerate(parts):
        one = qwen_model.predict_velocity(x[i : i + 1], sigmas[i : i + 1], part, guidance)
        torch.testing.assert_close(both[i : i + 1], one, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(encoded[i : i + 1], one, rtol=1e-5, atol=1e-5)


def test_true_cfg_runs_both_halves_in_one_transformer_call(qwen_model) -> None:
    x = torch.randn(2, 16, 8, 8, generator=torch.Generator().manual_seed(1))
    for guidance, calls in ((1.0, 1), (4.0, 1)):
        conditioning = qwen_model.encode_prompts(PROMPTS[:2], guidance_scale=guidance)
        before = qwen_model.transformer_calls
        with torch.no_grad():
            qwen_model.predict_velocity(x, torch.tensor([0.5, 0.5]), conditioning, guidance)
        assert qwen_model.transformer_calls - before == calls


def test_true_cfg_rescales_each_token_to_the_positive_norm(qwen_model) -> None:
    """||v|| per packed token equals the positive prediction's, and v is along neg + s (pos - neg)."""
    conditioning = qwen_model.encode_prompts(PROMPTS[:1], guidance_scale=4.0)
    x = torch.randn(1, 16, 8, 8, generator=torch.Generator().manual_seed(2))
    sigma = torch.tensor([0.7])
    with torch.no_grad():
        guided = pack(qwen_model.predict_velocity(x, sigma, conditioning, 4.0))
        positive = pack(qwen_model.predict_velocity(x, sigma, conditioning, 1.0))
        negative_only = Conditioning(
            {
                "prompt_embeds": conditioning.tensors["negative_prompt_embeds"],
                "prompt_embeds_mask": conditioning.tensors["negative_prompt_embeds_mask"],
            }
        )
        negative = pack(qwen_model.predict_velocity(x, sigma, negative_only, 1.0))
    torch.testing.assert_close(guided.norm(dim=-1), positive.norm(dim=-1), rtol=1e-5, atol=1e-6)
    combined = negative + 4.0 * (positive - negative)
    torch.testing.assert_close(
        guided, combined * positive.norm(dim=-1, keepdim=True) / combined.norm(dim=-1, keepdim=True)
    )


def test_sigma_schedule_is_the_pipelines_dynamic_shift(qwen_model, base_pipe) -> None:
    """The schedule of the pipeline's own call (mu from the image token count, terminal stretch), per size."""
    for size in (32, 64):
        base_pipe("x", num_inference_steps=4, true_cfg_scale=1.0, height=size, width=size, output_type="latent")
        sigmas = qwen_model.sigma_schedule(4, size, size)
        assert sigmas.dtype == torch.float32 and sigmas.shape == (5,)
        torch.testing.assert_close(sigmas, base_pipe.scheduler.sigmas.float(), rtol=0, atol=0)
        assert sigmas[0] == 1.0 and sigmas[-1] == 0.0 and abs(float(sigmas[-2]) - 0.02) < 1e-6
    assert not torch.equal(qwen_model.sigma_schedule(4, 32, 32), qwen_model.sigma_schedule(4, 64, 64))


def test_pack_and_unpack_are_inverse() -> None:
    x = torch.randn(2, 16, 8, 12)
    assert pack(x).shape == (2, 24, 64)
    assert torch.equal(unpack(pack(x), 8, 12), x)


def test_gradients_reach_only_the_lora_weights(qwen_model) -> None:
    conditioning = qwen_model.encode_prompts(PROMPTS[:2], guidance_scale=4.0)
    x = torch.randn(2, 16, 8, 8, generator=torch.Generator().manual_seed(1))
    params = qwen_model.trainable_parameters()
    assert params and all(p.requires_grad and p.dtype == torch.float32 for p in params)
    qwen_model.predict_velocity(x, torch.tensor([0.5, 0.8]), conditioning, 4.0).square().mean().backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in params)
    trainable = {id(p) for p in params}
    assert all(p.grad is None for p in qwen_model.transformer.parameters() if id(p) not in trainable)
    for p in params:
        p.grad = None


def test_encode_images_inverts_decode_scaling(qwen_model) -> None:
    images = torch.randint(0, 256, (1, SIZE, SIZE, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(3))
    latents = qwen_model.encode_images(images)
    assert latents.shape == (1, 16, 8, 8) and latents.dtype == torch.float32
    assert qwen_model.decode(latents).shape == images.shape


def test_errors_say_what_to_change(qwen_model) -> None:
    with pytest.raises(ConfigError) as error:
        qwen_model.latent_shape(36, 32)
    assert "multiples of 8" in error.value.hint
    with pytest.raises(ConfigError):
        qwen_model.sigma_schedule(0, SIZE, SIZE)
    without = qwen_model.encode_prompts(["a"], guidance_scale=1.0)
    with pytest.raises(RuntimeFailure, match="negative_prompt_embeds"):
        qwen_model.predict_velocity(torch.zeros(1, 16, 8, 8), torch.ones(1), without, 4.0)


def test_stack_texts_pads_under_the_mask() -> None:
    """CFG's negative (short, no padding) and positive (longer, padded) texts stacked for one call."""
    negative = (torch.ones(2, 3, 4), None)
    positive = (torch.full((2, 5, 4), 2.0), torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]))
    embeds, mask = stack_texts([negative, positive])
    assert embeds.shape == (4, 5, 4) and torch.equal(embeds[:2, 3:], torch.zeros(2, 2, 4))
    assert mask.tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]
    assert stack_texts([(torch.ones(1, 3, 4), None), (torch.ones(1, 3, 4), None)])[1] is None  # nothing padded


def test_one_cfg_call_gives_each_half_its_own_call(qwen_model) -> None:
    """Each half of the stacked call equals what a call of that half alone computes (the mask hides the padding)."""
    x = torch.randn(2, 16, 8, 8, generator=torch.Generator().manual_seed(4))
    conditioning = qwen_model.encode_prompts(PROMPTS[:2], guidance_scale=4.0)
    tokens = pack(x.to(qwen_model.dtype))
    timestep = torch.tensor([0.6, 0.6])
    shapes = [[(1, 4, 4)]] * 2
    with torch.no_grad():
        texts = [qwen_model._text(conditioning, key, 2) for key in ("negative_prompt_embeds", "prompt_embeds")]
        both = qwen_model._forward(
            torch.cat([tokens, tokens]), torch.cat([timestep, timestep]), shapes * 2, *stack_texts(texts)
        )
        alone = [qwen_model._forward(tokens, timestep, shapes, *text) for text in texts]
    torch.testing.assert_close(both[:2], alone[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(both[2:], alone[1], rtol=1e-5, atol=1e-5)
