"""``flux_kontext``'s LoRA files and exports load with diffusers alone and sample the trained policy for the same
source: ``FluxKontextPipeline.load_lora_weights`` on the LoRA, ``DiffusionPipeline.from_pretrained`` on the merged
export. (The LoRA a whole run writes is checked in test_kontext_runs.)"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from kontext_helpers import build_kontext, euler_edit, load_kontext_pipe, pipe_edit, source
from omni_rl_flux.config import DEFAULT_LORA_TARGETS
from omni_rl_flux.latents import pack

SOURCE = source(40, 48, seed=4)
PROMPT = "make the cat red"


@pytest.fixture(scope="module")
def trained(tiny_kontext_path: Path):
    """A model whose LoRA moved away from zero (as after training), so the policy differs from the base."""
    model = build_kontext(tiny_kontext_path, lora_rank=4, lora_alpha=8.0)
    generator = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for parameter in model.trainable_parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.2)
    return model


def test_lora_targets_are_fluxs(trained) -> None:
    names = {n for n, _ in trained.transformer.named_modules() if n.endswith(".lora_A")}
    prefix = "transformer_blocks.0."
    double = {n.removeprefix(prefix).removesuffix(".lora_A") for n in names if n.startswith(prefix)}
    assert double == set(DEFAULT_LORA_TARGETS) - {"proj_mlp", "proj_out"}


def test_exported_lora_loads_with_the_pipeline_and_changes_its_output(trained, tiny_kontext_path, tmp_path) -> None:
    trained.export_pipeline(tmp_path / "lora", merged=False)
    assert (tmp_path / "lora" / "pytorch_lora_weights.safetensors").is_file()
    pipe = load_kontext_pipe(tiny_kontext_path)
    base, _ = pipe_edit(pipe, PROMPT, SOURCE, steps=3, seed=3)
    pipe.load_lora_weights(tmp_path / "lora")
    with_lora, images = pipe_edit(pipe, PROMPT, SOURCE, steps=3, seed=3)
    assert not torch.allclose(base, with_lora, atol=1e-3)
    policy, policy_images = euler_edit(trained, PROMPT, SOURCE, steps=3, seed=3)
    torch.testing.assert_close(pack(policy), with_lora, rtol=0, atol=1e-4)  # alpha/rank travelled in the metadata
    assert (policy_images.int() - images.int()).abs().max() <= 1


def test_merged_export_reproduces_the_policy(trained, tmp_path) -> None:
    from diffusers import DiffusionPipeline

    trained.export_pipeline(tmp_path / "merged", merged=True)
    pipe = DiffusionPipeline.from_pretrained(tmp_path / "merged")
    pipe.set_progress_bar_config(disable=True)
    assert type(pipe).__name__ == "FluxKontextPipeline"
    assert not any("lora" in name for name in pipe.transformer.state_dict())
    assert trained.adapters is not None and "default" in trained.transformer.peft_config  # the model keeps its LoRA
    for cfg in (1.0, 2.0):
        latents, images = pipe_edit(pipe, PROMPT, SOURCE, steps=3, seed=4, cfg=cfg)
        policy, policy_images = euler_edit(trained, PROMPT, SOURCE, steps=3, seed=4, cfg=cfg)
        torch.testing.assert_close(pack(policy), latents, rtol=0, atol=1e-4)
        assert (policy_images.int() - images.int()).abs().max() <= 1
