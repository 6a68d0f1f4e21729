"""Loading variants: without T5, bfloat16, a tiny pipeline written on first use, SD3.5-Medium/Large layouts."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from omni_rl_sd3.config import SD3Config
from omni_rl_sd3.model import SD3Model

from omni_rl.context import BuildContext


def test_without_t5_matches_the_pipeline_without_t5(tiny_sd3_path: Path, sampling) -> None:
    from diffusers import StableDiffusion3Pipeline

    euler_sample, pipe_sample = sampling
    model = SD3Model(SD3Config(path=str(tiny_sd3_path), use_t5=False, lora_rank=2), BuildContext())
    assert model.pipeline.text_encoder_3 is None
    embeds = model.encode_prompts(["a cat"], guidance_scale=1.0).tensors["prompt_embeds"]
    assert embeds.shape == (1, 77 + 256, 96) and embeds[:, 77:].abs().max() == 0  # T5 part: zeros
    pipe = StableDiffusion3Pipeline.from_pretrained(tiny_sd3_path, text_encoder_3=None, tokenizer_3=None)
    pipe.set_progress_bar_config(disable=True)
    latents, _ = euler_sample(model, "a cat", steps=2, guidance=4.5, seed=0)
    ref_latents, _ = pipe_sample(pipe, "a cat", steps=2, guidance=4.5, seed=0)
    torch.testing.assert_close(latents, ref_latents, rtol=0, atol=1e-5)


def test_bfloat16_loads_and_runs(tiny_sd3_path: Path, sd3_model, sampling) -> None:
    euler_sample, _ = sampling
    model = SD3Model(SD3Config(path=str(tiny_sd3_path), dtype="bfloat16", lora_rank=4), BuildContext())
    assert model.dtype == torch.bfloat16 and model.transformer.pos_embed.proj.weight.dtype == torch.bfloat16
    assert all(p.dtype == torch.float32 for p in model.trainable_parameters())
    latents, images = euler_sample(model, "a cat", steps=2, guidance=4.5, seed=0)
    assert latents.dtype == torch.float32 and torch.isfinite(latents).all()
    assert images.dtype == torch.uint8 and images.shape == (1, 64, 64, 3)
    reference, _ = euler_sample(sd3_model, "a cat", steps=2, guidance=4.5, seed=0)
    assert (latents - reference).abs().mean() < 0.1 * reference.abs().mean()  # bf16 rounding, not a bug


def test_build_tiny_if_missing_writes_then_loads(tmp_path: Path) -> None:
    path = tmp_path / "fresh" / "sd3"
    config = SD3Config(path=str(path), build_tiny_if_missing=True, use_t5=False, lora_rank=2)
    model = SD3Model(config, BuildContext())
    assert (path / "model_index.json").is_file()
    assert model.pipeline.text_encoder_3 is None and model.pipeline_path == str(path)
    again = SD3Model(config, BuildContext())  # exists now: loaded, not rebuilt
    assert again.pipeline_path == str(path)


def test_sd35_medium_layout(tmp_path: Path, sampling) -> None:
    """QK RMS-norm and a second image self-attention (attn2) in the first block, as in SD3.5-Medium."""
    from diffusers import StableDiffusion3Pipeline
    from omni_rl_sd3.tiny import build_tiny_sd3_pipeline

    euler_sample, pipe_sample = sampling
    path = build_tiny_sd3_pipeline(tmp_path / "sd35m", qk_norm="rms_norm", dual_attention_layers=(0,), seed=1)
    model = SD3Model(SD3Config(path=str(path), lora_rank=2, gradient_checkpointing=True), BuildContext())
    lora_modules = {n.split(".lora_")[0] for n, _ in model.transformer.named_parameters() if "lora_" in n}
    assert "transformer_blocks.0.attn.to_q" in lora_modules
    assert not any(".attn2." in n for n in lora_modules)  # Flow-GRPO's default targets leave attn2 frozen
    pipe = StableDiffusion3Pipeline.from_pretrained(path)
    pipe.set_progress_bar_config(disable=True)
    latents, _ = euler_sample(model, "a cat", steps=2, guidance=4.5, seed=0)
    ref_latents, _ = pipe_sample(pipe, "a cat", steps=2, guidance=4.5, seed=0)
    torch.testing.assert_close(latents, ref_latents, rtol=0, atol=1e-5)
    # gradient checkpointing recomputes in backward and still trains the LoRA
    conditioning = model.encode_prompts(["a"], guidance_scale=1.0)
    x = torch.randn(1, 16, 8, 8, generator=torch.Generator().manual_seed(0))
    model.predict_velocity(x, torch.tensor([0.5]), conditioning, 1.0).square().mean().backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.trainable_parameters())


def test_sd35_large_layout(tmp_path: Path, sampling) -> None:
    """QK RMS-norm in every block and no second image self-attention, as in SD3.5-Large (and Large Turbo)."""
    from diffusers import StableDiffusion3Pipeline
    from omni_rl_sd3.tiny import build_tiny_sd3_pipeline

    euler_sample, pipe_sample = sampling
    path = build_tiny_sd3_pipeline(tmp_path / "sd35l", qk_norm="rms_norm", dual_attention_layers=(), seed=2)
    config = json.loads((Path(path) / "transformer" / "config.json").read_text())
    assert (config["qk_norm"], config["dual_attention_layers"]) == ("rms_norm", [])
    model = SD3Model(SD3Config(path=str(path), lora_rank=2), BuildContext())
    blocks = model.transformer.transformer_blocks
    assert all(type(block.attn.norm_q).__name__ == "RMSNorm" for block in blocks)
    assert all(getattr(block, "attn2", None) is None for block in blocks)
    lora_modules = {n.split(".lora_")[0] for n, _ in model.transformer.named_parameters() if "lora_" in n}
    for k in range(len(blocks)):
        assert f"transformer_blocks.{k}.attn.to_q" in lora_modules
        assert f"transformer_blocks.{k}.attn.add_q_proj" in lora_modules
    assert not any("norm_q" in n or "norm_k" in n for n in lora_modules)  # the norms' scales stay frozen
    pipe = StableDiffusion3Pipeline.from_pretrained(path)
    pipe.set_progress_bar_config(disable=True)
    for guidance in (1.0, 4.5):
        latents, _ = euler_sample(model, "a cat", steps=2, guidance=guidance, seed=0)
        ref_latents, _ = pipe_sample(pipe, "a cat", steps=2, guidance=guidance, seed=0)
        torch.testing.assert_close(latents, ref_latents, rtol=0, atol=1e-5)
