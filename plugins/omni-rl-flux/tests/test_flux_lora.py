"""LoRA files and exports: what omni-rl writes loads with diffusers alone and samples the trained policy."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from flux_helpers import PROMPTS, build_model, euler_sample, load_pipe, pipe_sample
from omni_rl_flux.config import DEFAULT_LORA_TARGETS
from omni_rl_flux.latents import pack

from omni_rl.errors import ConfigError, RuntimeFailure


@pytest.fixture(scope="module")
def trained(tiny_flux_path: Path):
    """A model whose LoRA moved away from zero (as after training), so the policy differs from the base."""
    model = build_model(tiny_flux_path, lora_rank=4, lora_alpha=8.0)
    generator = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for parameter in model.trainable_parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.2)
    return model


def _targets(model, prefix: str) -> set[str]:
    names = {n for n, _ in model.transformer.named_modules() if n.endswith(".lora_A")}
    return {n.removeprefix(prefix).removesuffix(".lora_A") for n in names if n.startswith(prefix)}


def test_default_targets_cover_both_block_kinds(trained) -> None:
    double = _targets(trained, "transformer_blocks.0.")
    single = _targets(trained, "single_transformer_blocks.0.")
    assert double == set(DEFAULT_LORA_TARGETS) - {"proj_mlp", "proj_out"}
    assert single == {"attn.to_q", "attn.to_k", "attn.to_v", "proj_mlp", "proj_out"}


def test_exported_lora_loads_with_the_pipeline_and_changes_its_output(trained, tiny_flux_path, tmp_path) -> None:
    trained.export_pipeline(tmp_path / "lora", merged=False)
    assert (tmp_path / "lora" / "pytorch_lora_weights.safetensors").is_file()
    pipe = load_pipe(tiny_flux_path)
    base, _ = pipe_sample(pipe, PROMPTS[0], steps=3, cfg=1.0, seed=3)
    pipe.load_lora_weights(tmp_path / "lora")
    with_lora, images = pipe_sample(pipe, PROMPTS[0], steps=3, cfg=1.0, seed=3)
    assert not torch.allclose(base, with_lora, atol=1e-3)
    policy, policy_images = euler_sample(trained, PROMPTS[0], steps=3, cfg=1.0, seed=3)
    torch.testing.assert_close(pack(policy), with_lora, rtol=0, atol=1e-4)  # alpha/rank travelled in the metadata
    assert (policy_images.int() - images.int()).abs().max() <= 1


def test_merged_export_reproduces_the_policy(trained, tmp_path) -> None:
    from diffusers import DiffusionPipeline

    trained.export_pipeline(tmp_path / "merged", merged=True)
    pipe = DiffusionPipeline.from_pretrained(tmp_path / "merged")
    pipe.set_progress_bar_config(disable=True)
    assert type(pipe).__name__ == "FluxPipeline"
    assert not any("lora" in name for name in pipe.transformer.state_dict())
    assert trained.adapters is not None and "default" in trained.transformer.peft_config  # the model keeps its LoRA
    for cfg in (1.0, 4.0):
        latents, images = pipe_sample(pipe, PROMPTS[1], steps=3, cfg=cfg, seed=4)
        policy, policy_images = euler_sample(trained, PROMPTS[1], steps=3, cfg=cfg, seed=4)
        torch.testing.assert_close(pack(policy), latents, rtol=0, atol=1e-4)
        assert (policy_images.int() - images.int()).abs().max() <= 1


def test_full_fine_tuning_has_no_lora_to_export(tiny_flux_path: Path, tmp_path: Path) -> None:
    model = build_model(tiny_flux_path, lora_rank=0)
    with pytest.raises(RuntimeFailure, match="merged"):
        model.export_pipeline(tmp_path / "x", merged=False)


def test_lora_targets_can_be_overridden_and_bad_ones_are_config_errors(tiny_flux_path: Path) -> None:
    model = build_model(tiny_flux_path, lora_target_modules=["norm1.linear", "norm.linear"])
    names = {n for n, _ in model.transformer.named_modules() if n.endswith(".lora_A")}
    assert names and all(".norm1.linear." in n or ".norm.linear." in n for n in names)
    with pytest.raises(ConfigError, match="FLUX") as error:
        build_model(tiny_flux_path, lora_target_modules=["nonexistent"])
    assert "proj_mlp" in error.value.hint
