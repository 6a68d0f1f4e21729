"""LoRA files and exports of the edit models: what omni-rl writes loads with the edit pipelines'
``load_lora_weights``, changes their output for the same condition, and samples the trained policy; a merged export
is a whole pipeline directory, processor folder included. (The pipelines get the stand-in processor and the tests'
condition areas, as in test_qwen_image_edit_pipeline.py.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from omni_rl_qwen_image.latents import pack
from qwen_image_edit_helpers import build_edit_model, load_pipe, pipe_output, rollout, source

from omni_rl import build
from omni_rl.protocols import RolloutRequest

STEPS = 3
CASES = {
    "edit": ("make it blue", (source(64, 96, 0),)),
    "plus": ("put Picture 2 on Picture 1", (source(64, 96, 1), source(72, 72, 2))),
}


@pytest.fixture(scope="module", params=["edit", "plus"])
def trained(request: pytest.FixtureRequest) -> tuple[str, Any, Path]:
    """A model whose LoRA moved away from zero (as after training), so the policy differs from the base."""
    name = request.param
    path = request.getfixturevalue("tiny_plus_path" if name == "plus" else "tiny_edit_path")
    model = build_edit_model(path, plus=name == "plus")
    generator = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for parameter in model.trainable_parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.2)
    return name, model, path


def _policy(model: Any, name: str, cfg: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The policy's ODE rollout of the case through the diffusers backend: (packed latents, uint8 image) of seed 3."""
    prompt, sources = CASES[name]
    request = RolloutRequest(
        prompts=[prompt], group_ids=[0], seeds=[3], step=-1, mode="eval", run_seed=0, conditions=[sources]
    )
    batch = rollout(model, build("sampler", "ode", {}), request, cfg=cfg, steps=STEPS)
    return pack(batch.final_latents), batch.images


def test_saved_lora_loads_with_the_pipeline_and_changes_its_output(trained, tmp_path: Path) -> None:
    name, model, path = trained
    prompt, sources = CASES[name]
    model.save_lora(tmp_path / "lora")
    assert (tmp_path / "lora" / "pytorch_lora_weights.safetensors").is_file()
    pipe = load_pipe(path)
    base, _ = pipe_output(pipe, prompt, sources, steps=STEPS, cfg=4.0, seed=3)
    pipe.load_lora_weights(tmp_path / "lora")
    with_lora, images = pipe_output(pipe, prompt, sources, steps=STEPS, cfg=4.0, seed=3)
    assert not torch.allclose(base, with_lora, atol=1e-3)
    policy, policy_images = _policy(model, name, 4.0)
    torch.testing.assert_close(policy, with_lora, rtol=0, atol=1e-4)  # alpha/rank travelled in the metadata
    assert (policy_images.int() - images.int()).abs().max() <= 1


def test_merged_export_is_a_whole_pipeline_that_samples_the_policy(trained, tmp_path: Path) -> None:
    name, model, _ = trained
    prompt, sources = CASES[name]
    model.export_pipeline(tmp_path / "merged", merged=True)
    index = json.loads((tmp_path / "merged" / "model_index.json").read_text())
    assert index["processor"] == ["transformers", "Qwen2VLProcessor"]
    assert (tmp_path / "merged" / "processor" / "preprocessor_config.json").is_file()
    pipe = load_pipe(tmp_path / "merged")
    assert type(pipe).__name__ == ("QwenImageEditPlusPipeline" if name == "plus" else "QwenImageEditPipeline")
    assert not any("lora" in key for key in pipe.transformer.state_dict())
    assert model.adapters is not None and "default" in model.transformer.peft_config  # the model keeps its LoRA
    for cfg in (1.0, 4.0):
        latents, images = pipe_output(pipe, prompt, sources, steps=STEPS, cfg=cfg, seed=3)
        policy, policy_images = _policy(model, name, cfg)
        torch.testing.assert_close(policy, latents, rtol=0, atol=1e-4)
        assert (policy_images.int() - images.int()).abs().max() <= 1


def test_default_lora_targets_are_qwen_images(trained) -> None:
    from omni_rl_qwen_image.config import DEFAULT_LORA_TARGETS

    _, model, _ = trained
    names = {n for n, _ in model.transformer.named_modules() if n.endswith(".lora_A")}
    block = {n.removeprefix("transformer_blocks.0.").removesuffix(".lora_A") for n in names if ".0." in n[:21]}
    assert block == set(DEFAULT_LORA_TARGETS)
    assert model.fsdp_units() == list(model.transformer.transformer_blocks)
