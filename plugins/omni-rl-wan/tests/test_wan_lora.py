"""The LoRA a Wan model writes is what ``WanPipeline.load_lora_weights`` loads: the pipeline then samples the
trained policy's video. Wan2.2's experts each get their file (the low-noise one under ``transformer_2/``, loaded
with ``load_into_transformer_2=True``); the merged export is a plain WanPipeline with the same video and the same
expert boundary."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from wan_helpers import PROMPTS, build_model, euler_video, load_pipe, pipeline_frames

STEPS = 4
GUIDANCE = 4.5


def _perturb_lora(model: object, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.trainable_parameters():  # type: ignore[attr-defined]
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.3)


def _error(frames: torch.Tensor, reference: np.ndarray) -> float:
    return float(np.abs(frames.numpy().astype(np.float64) / 255 - reference).max())


def test_wan21_lora_loads_into_the_pipeline(tiny_wan_path: Path, tmp_path: Path) -> None:
    model = build_model(tiny_wan_path)
    _perturb_lora(model, seed=1)
    noise, frames = euler_video(model, PROMPTS[0], steps=STEPS, guidance=GUIDANCE, seed=4)
    model.save_lora(tmp_path)
    assert (tmp_path / "pytorch_lora_weights.safetensors").is_file()
    pipe = load_pipe(tiny_wan_path)
    base = pipeline_frames(pipe, PROMPTS[0], noise, steps=STEPS, guidance=GUIDANCE)
    assert _error(frames, base) > 4 / 255, "the LoRA changed nothing visible"
    pipe.load_lora_weights(tmp_path)
    assert _error(frames, pipeline_frames(pipe, PROMPTS[0], noise, steps=STEPS, guidance=GUIDANCE)) <= 1 / 255


def test_wan22_lora_is_one_file_per_expert(tiny_wan22_path: Path, tmp_path: Path) -> None:
    model = build_model(tiny_wan22_path)
    _perturb_lora(model, seed=2)
    noise, frames = euler_video(model, PROMPTS[0], steps=STEPS, guidance=GUIDANCE, seed=4)
    model.save_lora(tmp_path)
    assert (tmp_path / "pytorch_lora_weights.safetensors").is_file()
    assert (tmp_path / "transformer_2" / "pytorch_lora_weights.safetensors").is_file()
    pipe = load_pipe(tiny_wan22_path)
    pipe.load_lora_weights(tmp_path)
    high_only = pipeline_frames(pipe, PROMPTS[0], noise, steps=STEPS, guidance=GUIDANCE)
    assert _error(frames, high_only) > 4 / 255, "the low-noise expert's LoRA changed nothing visible"
    pipe.load_lora_weights(tmp_path / "transformer_2", load_into_transformer_2=True)
    assert _error(frames, pipeline_frames(pipe, PROMPTS[0], noise, steps=STEPS, guidance=GUIDANCE)) <= 1 / 255


def test_wan22_lora_round_trips_and_only_trained_experts_are_written(tiny_wan22_path: Path, tmp_path: Path) -> None:
    model = build_model(tiny_wan22_path)
    _perturb_lora(model, seed=3)
    _, saved = euler_video(model, PROMPTS[1], steps=STEPS, guidance=GUIDANCE, seed=6)
    model.save_lora(tmp_path / "both")
    _perturb_lora(model, seed=4)
    model.load_lora(tmp_path / "both")
    _, again = euler_video(model, PROMPTS[1], steps=STEPS, guidance=GUIDANCE, seed=6)
    assert torch.equal(saved, again)
    low = build_model(tiny_wan22_path, train_experts="low_noise")
    low.save_lora(tmp_path / "low")
    assert not (tmp_path / "low" / "pytorch_lora_weights.safetensors").exists()
    assert (tmp_path / "low" / "transformer_2" / "pytorch_lora_weights.safetensors").is_file()


def test_wan22_merged_export_is_a_plain_pipeline(tiny_wan22_path: Path, tmp_path: Path) -> None:
    from diffusers import WanPipeline

    model = build_model(tiny_wan22_path)
    _perturb_lora(model, seed=5)
    noise, frames = euler_video(model, PROMPTS[0], steps=STEPS, guidance=GUIDANCE, seed=7)
    model.export_pipeline(tmp_path / "merged", merged=True)
    exported = WanPipeline.from_pretrained(tmp_path / "merged")
    exported.set_progress_bar_config(disable=True)
    assert exported.config.boundary_ratio == 0.875
    assert not any("lora_" in name for name, _ in exported.transformer_2.named_parameters())
    reference = pipeline_frames(exported, PROMPTS[0], noise, steps=STEPS, guidance=GUIDANCE)
    assert _error(frames, reference) <= 1 / 255
    assert any("lora_" in name for name, _ in model.transformer.named_parameters()), "the model lost its LoRA"
