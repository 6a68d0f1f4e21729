"""The edit models' options on CPU: bf16 weights with fp32 LoRA, gradient checkpointing (through zero_cond_t's
per-token modulation), the text encoder and VAE offloaded between uses, the condition-latent cache, the VLM copy's
size, and the option and path errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from qwen_image_edit_helpers import build_edit_model, source

from omni_rl.errors import ConfigError

PLUS = ("put Picture 2 on Picture 1", (source(64, 96, 0), source(72, 72, 1)))


def _loss_and_grads(model, guidance: float = 4.0) -> tuple[torch.Tensor, list[torch.Tensor]]:
    prompt, sources = PLUS
    conditioning = model.encode_conditions([prompt, "make it blue"], [sources, sources[:1]], guidance_scale=guidance)
    x = torch.randn((2, *model.latent_shape(32, 32)), generator=torch.Generator().manual_seed(0))
    params = model.trainable_parameters()
    for p in params:
        p.grad = None
    loss = model.predict_velocity(x, torch.tensor([0.8, 0.4]), conditioning, guidance).square().mean()
    loss.backward()
    grads = [torch.zeros_like(p) if p.grad is None else p.grad.clone() for p in params]
    for p in params:
        p.grad = None
    return loss.detach(), grads


def test_bf16_weights_train_fp32_lora(tiny_plus_path: Path) -> None:
    model = build_edit_model(tiny_plus_path, plus=True, dtype="bfloat16")
    assert model.pipeline.text_encoder.dtype == torch.bfloat16 and model.vae.dtype == torch.bfloat16
    assert all(p.dtype == torch.float32 for p in model.trainable_parameters())
    loss, grads = _loss_and_grads(model)
    assert torch.isfinite(loss) and any(g.abs().sum() > 0 for g in grads)
    conditioning = model.encode_conditions(*([x] for x in PLUS), guidance_scale=1.0)
    assert conditioning.tensors["condition_latents"].dtype == torch.bfloat16


def test_gradient_checkpointing_gives_the_same_gradients(plus_model, tiny_plus_path: Path) -> None:
    checkpointed = build_edit_model(tiny_plus_path, plus=True, gradient_checkpointing=True)
    assert checkpointed.transformer.gradient_checkpointing
    loss, grads = _loss_and_grads(checkpointed)
    expected_loss, expected = _loss_and_grads(plus_model)
    torch.testing.assert_close(loss, expected_loss)
    assert any(g.abs().sum() > 0 for g in grads)
    for got, want in zip(grads, expected, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-7)


def test_offloaded_text_encoder_and_vae_give_the_same_conditioning(plus_model, tiny_plus_path: Path) -> None:
    """On CPU the moves are no-ops: this checks the offload paths run, give the same numbers, and leave the
    modules on the CPU."""
    offloaded = build_edit_model(tiny_plus_path, plus=True, offload_text_encoders=True, offload_vae=True)
    got = offloaded.encode_conditions(*([x] for x in PLUS), guidance_scale=4.0)
    expected = plus_model.encode_conditions(*([x] for x in PLUS), guidance_scale=4.0)
    for key, tensor in expected.tensors.items():
        assert torch.equal(got.tensors[key], tensor), key
    assert next(offloaded.pipeline.text_encoder.parameters()).device.type == "cpu"
    assert next(offloaded.vae.parameters()).device.type == "cpu"


def test_a_source_seen_again_skips_the_vae(tiny_edit_path: Path) -> None:
    model = build_edit_model(tiny_edit_path, plus=False, prompt_cache_size=2)
    calls = []
    original = model._encode_vae_copy
    model._encode_vae_copy = lambda image: calls.append(image.size) or original(image)
    first = model.encode_conditions(["make it blue"], [(source(64, 96, 0),)], guidance_scale=1.0)
    again = model.encode_conditions(["a new instruction"], [(source(64, 96, 0),)], guidance_scale=1.0)
    assert calls == [(96, 64)]
    assert torch.equal(first.tensors["condition_latents"], again.tensors["condition_latents"])
    for seed in (1, 2, 0):  # two new sources push the first out of a cache of 2
        model.encode_conditions(["make it blue"], [(source(64, 96, seed),)], guidance_scale=1.0)
    assert len(calls) == 4


def test_the_vlm_copy_has_its_own_size(edit_model, tiny_edit_path: Path) -> None:
    """Qwen-Image-Edit encodes the VAE copy with its VLM by default; vlm_condition_max_area gives the VLM another
    copy (fewer image tokens here) and leaves the condition latents alone."""
    smaller = build_edit_model(tiny_edit_path, plus=False, vlm_condition_max_area=32 * 32)
    pair = (["make it blue"], [(source(64, 96, 0),)])
    default = edit_model.encode_conditions(*pair, guidance_scale=1.0).tensors
    other = smaller.encode_conditions(*pair, guidance_scale=1.0).tensors
    assert torch.equal(default["condition_latents"], other["condition_latents"])
    assert other["prompt_embeds"].shape[1] < default["prompt_embeds"].shape[1]


def test_bad_options_and_paths_are_config_errors(tiny_edit_path: Path, tiny_plus_path: Path) -> None:
    with pytest.raises(ConfigError, match="condition_max_area"):
        build_edit_model(tiny_edit_path, plus=False, condition_max_area=100)
    with pytest.raises(ConfigError, match="vlm_condition_max_area"):
        build_edit_model(tiny_edit_path, plus=False, vlm_condition_max_area=0)
    with pytest.raises(ConfigError, match="not a QwenImageEditPipeline"):
        build_edit_model(tiny_plus_path, plus=False)
    with pytest.raises(ConfigError, match="not a QwenImageEditPlusPipeline"):
        build_edit_model(tiny_edit_path, plus=True)
