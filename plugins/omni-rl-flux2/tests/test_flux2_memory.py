"""The memory options on the tiny pipeline: bf16 weights with fp32 LoRA, gradient checkpointing (the same
gradients), the Qwen3 encoder / VAE offloaded (no-ops on a CPU, but the code paths run), the prompt-embedding cache
with the negative prompt pinned, and one FSDP2 unit per double- and single-stream block."""

from __future__ import annotations

from pathlib import Path

import torch
from flux2_helpers import PROMPTS, SIZE, build_model


def _loss_and_grads(model, cfg: float = 4.0) -> tuple[float, list[torch.Tensor]]:
    conditioning = model.encode_prompts(PROMPTS[:2], guidance_scale=cfg)
    x = torch.randn((2, *model.latent_shape(SIZE, SIZE)), generator=torch.Generator().manual_seed(0))
    params = model.trainable_parameters()
    for p in params:
        p.grad = None
    loss = model.predict_velocity(x, torch.tensor([0.8, 0.4]), conditioning, cfg).square().mean()
    loss.backward()
    return float(loss.detach()), [p.grad.clone() for p in params]


def test_gradient_checkpointing_gives_the_same_gradients(tiny_base_path: Path) -> None:
    plain = build_model(tiny_base_path, lora_init="default")
    checkpointed = build_model(tiny_base_path, lora_init="default", gradient_checkpointing=True)
    assert checkpointed.transformer.gradient_checkpointing
    for model in (plain, checkpointed):  # B = 0 would make every LoRA A gradient 0
        with torch.no_grad():
            for p in model.trainable_parameters():
                p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())) * 0.05)
    loss_a, grads_a = _loss_and_grads(plain)
    loss_b, grads_b = _loss_and_grads(checkpointed)
    assert loss_a == loss_b
    assert any(g.abs().sum() > 0 for g in grads_a)
    for a, b in zip(grads_a, grads_b, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)


def test_bfloat16_weights_keep_float32_lora(tiny_base_path: Path) -> None:
    model = build_model(tiny_base_path, dtype="bfloat16")
    assert model.transformer.x_embedder.weight.dtype == torch.bfloat16
    assert model.pipeline.text_encoder.dtype == torch.bfloat16
    assert all(p.dtype == torch.float32 for p in model.trainable_parameters())
    loss, grads = _loss_and_grads(model)
    assert torch.isfinite(torch.tensor(loss)) and all(torch.isfinite(g).all() for g in grads)
    assert model.decode(torch.zeros(1, *model.latent_shape(SIZE, SIZE))).dtype == torch.uint8


def test_offloading_and_the_prompt_cache(tiny_base_path: Path, base_model) -> None:
    model = build_model(tiny_base_path, offload_text_encoders=True, offload_vae=True, prompt_cache_size=1)
    first = model.encode_prompts(PROMPTS[:1], guidance_scale=4.0)
    assert model.prompts.encoded_count == 2  # the prompt and the negative prompt
    model.encode_prompts(PROMPTS[:1], guidance_scale=4.0)
    assert model.prompts.encoded_count == 2  # both cached
    model.encode_prompts(PROMPTS[1:2], guidance_scale=4.0)  # evicts PROMPTS[0]; the negative prompt is pinned
    model.encode_prompts(PROMPTS[:1], guidance_scale=4.0)
    assert model.prompts.encoded_count == 4
    expected = base_model.encode_prompts(PROMPTS[:1], guidance_scale=4.0)
    for key, tensor in expected.tensors.items():
        torch.testing.assert_close(first.tensors[key], tensor, rtol=0, atol=0)
    latents = torch.randn((1, *model.latent_shape(SIZE, SIZE)), generator=torch.Generator().manual_seed(1))
    assert torch.equal(model.decode(latents), base_model.decode(latents))
    assert next(model.pipeline.text_encoder.parameters()).device.type == "cpu"


def test_fsdp_units_are_the_double_and_single_stream_blocks(base_model) -> None:
    kinds = [type(u).__name__ for u in base_model.fsdp_units()]
    assert kinds == ["Flux2TransformerBlock"] + ["Flux2SingleTransformerBlock"] * 2


def test_image_sizes_must_be_whole_patches(base_model) -> None:
    import pytest

    from omni_rl.errors import ConfigError

    assert base_model.latent_shape(32, 48) == (32, 4, 6)
    with pytest.raises(ConfigError) as error:
        base_model.latent_shape(36, 32)  # not a whole 2x2 patch of the 4x VAE's latents
    assert "multiples of 8" in error.value.hint
