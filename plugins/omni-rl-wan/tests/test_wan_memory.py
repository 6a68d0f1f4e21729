"""The memory options change where modules live, never the video; the prompt cache skips UMT5 for prompts seen
before (the negative prompt is always kept); Wan2.2 TI2V's per-token timesteps (``expand_timesteps``) reproduce
the pipeline too."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from wan_helpers import FRAMES, PROMPTS, SIZE, build_model, euler_video, initial_noise, load_pipe

STEPS = 4


def test_offloading_and_the_cache_leave_the_video_unchanged(tiny_wan_path: Path) -> None:
    plain = build_model(tiny_wan_path)
    offloaded = build_model(
        tiny_wan_path, offload_text_encoders=True, offload_vae=True, prompt_cache_size=0, gradient_checkpointing=True
    )
    _, expected = euler_video(plain, PROMPTS[1], steps=STEPS, guidance=4.5, seed=2)
    _, got = euler_video(offloaded, PROMPTS[1], steps=STEPS, guidance=4.5, seed=2)
    assert torch.equal(expected, got)
    assert next(offloaded.vae.parameters()).device.type == "cpu"


def test_the_prompt_cache_encodes_each_prompt_once(tiny_wan_path: Path) -> None:
    model = build_model(tiny_wan_path, prompt_cache_size=8)
    model.encode_prompts([PROMPTS[0], PROMPTS[0]], guidance_scale=4.5)
    assert model.prompts.encoded_count == 2  # the prompt and the negative prompt
    again = model.encode_prompts([PROMPTS[0]], guidance_scale=4.5)
    assert model.prompts.encoded_count == 2
    assert again.tensors["prompt_embeds"].shape == (1, 512, 32)  # zero-padded to max_sequence_length, as Wan does
    uncached = build_model(tiny_wan_path, prompt_cache_size=0)
    uncached.encode_prompts([PROMPTS[0]], guidance_scale=4.5)
    uncached.encode_prompts([PROMPTS[0]], guidance_scale=4.5)
    assert uncached.prompts.encoded_count == 3  # the prompt twice, the negative prompt once (always kept)


def test_per_token_timesteps_reproduce_the_ti2v_pipeline(tiny_wan_path: Path, tmp_path: Path) -> None:
    path = tmp_path / "ti2v"
    shutil.copytree(tiny_wan_path, path)
    index = json.loads((path / "model_index.json").read_text())
    index["expand_timesteps"] = True  # Wan2.2 TI2V-5B's text-to-video setting
    (path / "model_index.json").write_text(json.dumps(index))
    model = build_model(path)
    assert model.expand_timesteps
    noise = initial_noise(model, 9)
    sigmas = model.sigma_schedule(STEPS, SIZE, SIZE)
    conditioning = model.encode_prompts([PROMPTS[0]], guidance_scale=4.5)
    x = noise.clone()
    with torch.no_grad():
        for i in range(STEPS):
            x = x + model.predict_velocity(x, sigmas[i].expand(1), conditioning, 4.5) * (sigmas[i + 1] - sigmas[i])
    kwargs = {"height": SIZE, "width": SIZE, "num_frames": FRAMES, "num_inference_steps": STEPS}
    reference = load_pipe(path)(PROMPTS[0], guidance_scale=4.5, latents=noise.clone(), output_type="latent", **kwargs)
    # the model sends CFG's two halves in one call where the pipeline makes two: float32 rounding of a larger batch
    # (measured 1.6e-6 at most)
    torch.testing.assert_close(x, reference.frames, rtol=1e-5, atol=1e-5)


def test_the_old_offload_text_encoder_key_still_offloads_with_a_warning() -> None:
    """``offload_text_encoder`` was this model's name for ``offload_text_encoders`` until omni-rl 0.1."""
    from omni_rl_wan.hooks import omni_rl_models

    from omni_rl.config import structure_options

    (spec,) = [s for s in omni_rl_models() if s.name == "wan"]
    with pytest.warns(FutureWarning, match="offload_text_encoder is deprecated.*offload_text_encoders"):
        options = structure_options(spec, {"path": "models/Wan2.1", "offload_text_encoder": True})
    assert options.offload_text_encoders is True
