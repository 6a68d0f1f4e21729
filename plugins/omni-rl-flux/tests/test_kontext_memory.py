"""FLUX's memory options on ``flux_kontext``, with batches that mix condition sizes (so the gradient flows through
the per-size transformer calls and their reordering): bf16 weights with fp32 LoRA, gradient checkpointing (the
same gradients), the VAE and text encoders offloaded (no-ops on a CPU, but the code paths run, the condition's VAE
encode among them), and FLUX's FSDP2 units."""

from __future__ import annotations

from pathlib import Path

import torch
from kontext_helpers import SIZE, build_kontext, source

PROMPTS = ["make the cat red", "add a hat"]
SOURCES = [(source(40, 48, seed=1),), (source(32, 24, seed=2),)]


def _loss_and_grads(model) -> tuple[float, list[torch.Tensor]]:
    conditioning = model.encode_conditions(PROMPTS, SOURCES, guidance_scale=1.0)
    x = torch.randn((2, *model.latent_shape(SIZE, SIZE)), generator=torch.Generator().manual_seed(0))
    params = model.trainable_parameters()
    for p in params:
        p.grad = None
    loss = model.predict_velocity(x, torch.tensor([0.8, 0.4]), conditioning, 1.0).square().mean()
    loss.backward()
    return float(loss.detach()), [p.grad.clone() for p in params]


def _perturb(model) -> None:
    with torch.no_grad():  # B = 0 would make every LoRA A gradient 0
        for p in model.trainable_parameters():
            p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())) * 0.05)


def test_gradient_checkpointing_gives_the_same_gradients(tiny_kontext_path: Path) -> None:
    plain = build_kontext(tiny_kontext_path, lora_init="default")
    checkpointed = build_kontext(tiny_kontext_path, lora_init="default", gradient_checkpointing=True)
    assert checkpointed.transformer.gradient_checkpointing
    for model in (plain, checkpointed):
        _perturb(model)
    loss_a, grads_a = _loss_and_grads(plain)
    loss_b, grads_b = _loss_and_grads(checkpointed)
    assert loss_a == loss_b
    assert any(bool(g.abs().sum() > 0) for g in grads_a)
    for a, b in zip(grads_a, grads_b, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)


def test_bfloat16_weights_keep_float32_lora(tiny_kontext_path: Path) -> None:
    model = build_kontext(tiny_kontext_path, dtype="bfloat16")
    assert model.transformer.x_embedder.weight.dtype == torch.bfloat16
    assert all(p.dtype == torch.float32 for p in model.trainable_parameters())
    conditioning = model.encode_conditions(PROMPTS, SOURCES, guidance_scale=1.0)
    assert conditioning.tensors["condition_latents"].dtype == torch.bfloat16  # the VAE's, as in the pipeline
    _perturb(model)
    loss, grads = _loss_and_grads(model)
    assert torch.isfinite(torch.tensor(loss)) and all(torch.isfinite(g).all() for g in grads)


def test_offloading_gives_the_same_conditioning(tiny_kontext_path: Path, kontext_model) -> None:
    model = build_kontext(tiny_kontext_path, offload_text_encoders=True, offload_vae=True, prompt_cache_size=1)
    offloaded = model.encode_conditions(PROMPTS, SOURCES, guidance_scale=2.0)
    expected = kontext_model.encode_conditions(PROMPTS, SOURCES, guidance_scale=2.0)
    assert offloaded.tensors.keys() == expected.tensors.keys()
    for key, tensor in expected.tensors.items():
        torch.testing.assert_close(offloaded.tensors[key], tensor, rtol=0, atol=0)
    assert next(model.vae.parameters()).device.type == "cpu"


def test_fsdp_units_are_the_double_and_single_stream_blocks(kontext_model) -> None:
    kinds = [type(u).__name__ for u in kontext_model.fsdp_units()]
    assert kinds == ["FluxTransformerBlock"] + ["FluxSingleTransformerBlock"] * 2
