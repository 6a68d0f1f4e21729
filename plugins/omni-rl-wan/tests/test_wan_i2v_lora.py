"""The LoRA an image-to-video model writes is what ``WanImageToVideoPipeline.load_lora_weights`` loads: the pipeline
then samples the trained policy's video from the same first frame (Wan2.2 I2V-A14B: one file per expert, the
low-noise one with ``load_into_transformer_2=True``), and the merged export is a plain ``WanImageToVideoPipeline``
with the same video (its image encoder and layout kept)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from wan_i2v_helpers import LAYOUTS, PROMPTS, build_i2v_model, euler_video, first_frame, frame_error, load_i2v_pipe
from wan_i2v_helpers import pipeline_frames as frames_of

GUIDANCE = 4.5


def _perturb_lora(model: object, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.trainable_parameters():  # type: ignore[attr-defined]
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.3)


# Wan2.1 I2V: load_lora_weights takes a LoRA without the image key/value projections (add_k_proj, add_v_proj) for a
# text-to-video one and adds zero LoRA weights for them, which peft reports; the zeros change nothing
@pytest.mark.filterwarnings("ignore:While injecting the PEFT adapters:RuntimeWarning")
@pytest.mark.parametrize("layout", ["wan21_i2v", "wan22_ti2v"])
def test_lora_loads_into_the_pipeline_and_changes_its_video(
    tiny_i2v_paths: dict[str, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, layout: str
) -> None:
    size = LAYOUTS[layout].size
    model = build_i2v_model(tiny_i2v_paths[layout], LAYOUTS[layout].model)
    _perturb_lora(model, seed=1)
    image = first_frame(3)
    noise, _, frames = euler_video(model, PROMPTS[0], image, size=size, guidance=GUIDANCE, seed=4)
    model.save_lora(tmp_path)
    assert (tmp_path / "pytorch_lora_weights.safetensors").is_file()
    pipe = load_i2v_pipe(tiny_i2v_paths[layout], monkeypatch)
    base = frames_of(pipe, image, PROMPTS[0], noise, size=size, guidance=GUIDANCE)
    assert frame_error(frames, base) > 4, "the LoRA changed nothing visible"
    pipe.load_lora_weights(tmp_path)
    assert frame_error(frames, frames_of(pipe, image, PROMPTS[0], noise, size=size, guidance=GUIDANCE)) <= 1


def test_a14b_lora_is_one_file_per_expert(
    tiny_i2v_paths: dict[str, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    model = build_i2v_model(tiny_i2v_paths["wan22_i2v"], "wan_i2v")
    _perturb_lora(model, seed=2)
    image = first_frame(3)
    noise, _, frames = euler_video(model, PROMPTS[0], image, size=32, guidance=GUIDANCE, seed=4)
    model.save_lora(tmp_path)
    pipe = load_i2v_pipe(tiny_i2v_paths["wan22_i2v"], monkeypatch)
    pipe.load_lora_weights(tmp_path)
    high_only = frames_of(pipe, image, PROMPTS[0], noise, size=32, guidance=GUIDANCE)
    assert frame_error(frames, high_only) > 4, "the low-noise expert's LoRA changed nothing visible"
    pipe.load_lora_weights(tmp_path / "transformer_2", load_into_transformer_2=True)
    assert frame_error(frames, frames_of(pipe, image, PROMPTS[0], noise, size=32, guidance=GUIDANCE)) <= 1


def test_merged_export_is_a_plain_i2v_pipeline(
    tiny_i2v_paths: dict[str, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    model = build_i2v_model(tiny_i2v_paths["wan21_i2v"], "wan_i2v")
    _perturb_lora(model, seed=5)
    image = first_frame(3)
    noise, _, frames = euler_video(model, PROMPTS[1], image, size=32, guidance=GUIDANCE, seed=7)
    model.export_pipeline(tmp_path / "merged", merged=True)
    exported = load_i2v_pipe(tmp_path / "merged", monkeypatch)
    assert exported.image_encoder is not None and exported.config.expand_timesteps is False
    assert not any("lora_" in name for name, _ in exported.transformer.named_parameters())
    assert frame_error(frames, frames_of(exported, image, PROMPTS[1], noise, size=32, guidance=GUIDANCE)) <= 1
