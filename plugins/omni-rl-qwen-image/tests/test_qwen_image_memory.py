"""Memory options a 20B model needs, on CPU: bf16 weights with fp32 LoRA, gradient checkpointing, the text
encoder and VAE offloaded between uses, prompt-embedding caching, and FSDP2 units that are the blocks."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from qwen_image_helpers import PROMPTS, SIZE, build_model


def _loss_and_grads(model, guidance: float = 4.0) -> tuple[torch.Tensor, list[torch.Tensor]]:
    conditioning = model.encode_prompts(PROMPTS[:2], guidance_scale=guidance)
    x = torch.randn(2, 16, 8, 8, generator=torch.Generator().manual_seed(0))
    params = model.trainable_parameters()
    for p in params:
        p.grad = None
    loss = model.predict_velocity(x, torch.tensor([0.8, 0.4]), conditioning, guidance).square().mean()
    loss.backward()
    # the last block's text-stream output is unused (only image tokens leave the transformer): no grad there
    grads = [torch.zeros_like(p) if p.grad is None else p.grad.clone() for p in params]
    for p in params:
        p.grad = None
    return loss.detach(), grads


def test_bf16_weights_train_fp32_lora(tiny_qwen_path: Path) -> None:
    model = build_model(tiny_qwen_path, dtype="bfloat16")
    assert model.pipeline.text_encoder.dtype == torch.bfloat16 and model.vae.dtype == torch.bfloat16
    frozen = [p for n, p in model.transformer.named_parameters() if "lora_" not in n]
    assert all(p.dtype == torch.bfloat16 for p in frozen)
    assert all(p.dtype == torch.float32 for p in model.trainable_parameters())
    loss, grads = _loss_and_grads(model)
    assert torch.isfinite(loss) and any(g.abs().sum() > 0 for g in grads)
    assert model.decode(torch.zeros(1, 16, 8, 8)).dtype == torch.uint8


def test_gradient_checkpointing_gives_the_same_gradients(qwen_model, tiny_qwen_path: Path) -> None:
    checkpointed = build_model(tiny_qwen_path, gradient_checkpointing=True)
    assert checkpointed.transformer.gradient_checkpointing
    loss, grads = _loss_and_grads(checkpointed)
    expected_loss, expected = _loss_and_grads(build_model(tiny_qwen_path))
    torch.testing.assert_close(loss, expected_loss)
    for got, want in zip(grads, expected, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-7)


def test_offloaded_text_encoder_and_vae_give_the_same_results(qwen_model, tiny_qwen_path: Path) -> None:
    """On CPU the move is a no-op, so this checks the offload paths run and give the same numbers; the modules
    are on the CPU after each use."""
    offloaded = build_model(tiny_qwen_path, offload_text_encoders=True, offload_vae=True)
    cond = offloaded.encode_prompts(PROMPTS[:2], guidance_scale=4.0)
    expected = qwen_model.encode_prompts(PROMPTS[:2], guidance_scale=4.0)
    for key, tensor in expected.tensors.items():
        torch.testing.assert_close(cond.tensors[key], tensor, rtol=0, atol=0)
    latents = torch.randn(1, 16, 8, 8, generator=torch.Generator().manual_seed(1))
    assert torch.equal(offloaded.decode(latents), qwen_model.decode(latents))
    assert next(offloaded.pipeline.text_encoder.parameters()).device.type == "cpu"
    assert next(offloaded.vae.parameters()).device.type == "cpu"


def test_each_distinct_prompt_is_encoded_once(tiny_qwen_path: Path) -> None:
    model = build_model(tiny_qwen_path, prompt_cache_size=2)
    encoder = model.prompts
    model.encode_prompts([PROMPTS[0], PROMPTS[0], PROMPTS[1]], guidance_scale=4.0)
    assert encoder.encoded_count == 3  # two prompts and the negative prompt
    first = model.encode_prompts([PROMPTS[1], PROMPTS[0]], guidance_scale=4.0)
    assert encoder.encoded_count == 3  # all cached, the negative too
    model.encode_prompts([PROMPTS[2]], guidance_scale=4.0)  # evicts the least recently used prompt (PROMPTS[1])
    model.encode_prompts([PROMPTS[0]], guidance_scale=4.0)
    assert encoder.encoded_count == 4
    model.encode_prompts([PROMPTS[1]], guidance_scale=1.0)
    assert encoder.encoded_count == 5
    again = model.encode_prompts([PROMPTS[1], PROMPTS[0]], guidance_scale=4.0)
    for key, tensor in first.tensors.items():
        assert torch.equal(again.tensors[key], tensor)
    uncached = build_model(tiny_qwen_path, prompt_cache_size=0)
    uncached.encode_prompts([PROMPTS[0]], guidance_scale=4.0)
    uncached.encode_prompts([PROMPTS[0]], guidance_scale=4.0)
    assert uncached.prompts.encoded_count == 3  # the prompt twice, the negative prompt once (always kept)


def test_fsdp_units_are_the_transformer_blocks(qwen_model) -> None:
    from omni_rl.engine.fsdp import fsdp_units

    units = fsdp_units(qwen_model)
    assert units == list(qwen_model.transformer.transformer_blocks) and len(units) == 2
    assert SIZE % (qwen_model.vae_scale_factor * 2) == 0


def test_the_old_offload_text_encoder_key_still_offloads_with_a_warning() -> None:
    """``offload_text_encoder`` was this model's name for ``offload_text_encoders`` until omni-rl 0.1."""
    from omni_rl_qwen_image.hooks import omni_rl_models

    from omni_rl.config import structure_options

    spec = next(s for s in omni_rl_models() if s.name == "qwen_image")
    with pytest.warns(FutureWarning, match="offload_text_encoder is deprecated.*offload_text_encoders"):
        options = structure_options(spec, {"path": "models/Qwen-Image", "offload_text_encoder": True})
    assert options.offload_text_encoders is True
