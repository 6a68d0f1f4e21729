"""LoRA files and exports: what omni-rl writes loads with diffusers alone (``Flux2KleinPipeline.load_lora_weights``)
and samples the trained policy; the merged export reproduces it without peft."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from flux2_helpers import PROMPTS, build_model, euler_sample, load_pipe, pipe_images
from omni_rl_flux2.config import DEFAULT_LORA_TARGETS

from omni_rl.errors import ConfigError, RuntimeFailure


@pytest.fixture(scope="module")
def trained(tiny_base_path: Path):
    """A model whose LoRA moved away from zero (as after training), so the policy differs from the base."""
    model = build_model(tiny_base_path, lora_rank=4, lora_alpha=8.0)
    generator = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for parameter in model.trainable_parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.3)
    return model


def _targets(model, prefix: str) -> set[str]:
    names = {n for n, _ in model.transformer.named_modules() if n.endswith(".lora_A")}
    return {n.removeprefix(prefix).removesuffix(".lora_A") for n in names if n.startswith(prefix)}


def test_default_targets_cover_both_block_kinds(trained) -> None:
    assert _targets(trained, "transformer_blocks.0.") == set(DEFAULT_LORA_TARGETS) - {"attn.to_qkv_mlp_proj"}
    assert _targets(trained, "single_transformer_blocks.0.") == {"attn.to_qkv_mlp_proj"}


@pytest.mark.parametrize("cfg", [1.0, 4.0], ids=["no_cfg", "cfg"])
def test_saved_lora_loads_with_the_pipeline_and_changes_its_output(trained, tiny_base_path, tmp_path, cfg) -> None:
    trained.save_lora(tmp_path / "lora")
    assert (tmp_path / "lora" / "pytorch_lora_weights.safetensors").is_file()
    pipe = load_pipe(tiny_base_path)
    base = pipe_images(pipe, PROMPTS[0], steps=3, cfg=cfg, seed=3)
    pipe.load_lora_weights(tmp_path / "lora")
    with_lora = pipe_images(pipe, PROMPTS[0], steps=3, cfg=cfg, seed=3)
    assert (base.int() - with_lora.int()).abs().max() > 2
    _, policy = euler_sample(trained, PROMPTS[0], steps=3, cfg=cfg, seed=3)
    assert (policy.int() - with_lora.int()).abs().max() <= 1  # alpha/rank travelled in the metadata


def test_merged_export_reproduces_the_policy(trained, tmp_path) -> None:
    from diffusers import DiffusionPipeline

    trained.export_pipeline(tmp_path / "merged", merged=True)
    pipe = DiffusionPipeline.from_pretrained(tmp_path / "merged")
    pipe.set_progress_bar_config(disable=True)
    assert type(pipe).__name__ == "Flux2KleinPipeline"
    assert not any("lora" in name for name in pipe.transformer.state_dict())
    assert trained.adapters is not None and "default" in trained.transformer.peft_config  # the model keeps its LoRA
    images = pipe_images(pipe, PROMPTS[1], steps=3, cfg=4.0, seed=4)
    _, policy = euler_sample(trained, PROMPTS[1], steps=3, cfg=4.0, seed=4)
    assert (policy.int() - images.int()).abs().max() <= 1


def test_full_fine_tuning_has_no_lora_to_export(tiny_base_path: Path, tmp_path: Path) -> None:
    model = build_model(tiny_base_path, lora_rank=0)
    with pytest.raises(RuntimeFailure, match="merged"):
        model.export_pipeline(tmp_path / "x", merged=False)


def test_bad_lora_targets_are_config_errors(tiny_base_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"FLUX\.2") as error:
        build_model(tiny_base_path, lora_target_modules=["nonexistent"])
    assert "to_qkv_mlp_proj" in error.value.hint


def test_encode_images_gives_the_latent_layout_decode_takes(trained) -> None:
    """encode_images' latents are the patchified, batch-normalised (4C, h/2, w/2) ones decode takes."""
    latents = torch.randn((2, *trained.latent_shape(32, 32)), generator=torch.Generator().manual_seed(0))
    images = trained.decode(latents)
    assert images.shape == (2, 32, 32, 3) and images.dtype == torch.uint8
    encoded = trained.encode_images(images)
    assert encoded.shape == latents.shape and encoded.dtype == torch.float32 and encoded.isfinite().all()
    assert trained.decode(encoded).shape == images.shape
