"""The ``wan`` model reproduces ``WanPipeline.__call__``: an Euler loop over its schedule and velocity gives the
pipeline's frames (within 1/255, float32) for both layouts, with CFG on and off; each step goes to the expert the
pipeline routes it to, with ``guidance_scale_2`` on the low-noise one; the options that do not fit a layout are
refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from wan_helpers import FRAMES, PROMPTS, SIZE, build_model, euler_video, initial_noise, load_pipe, pipeline_frames

from omni_rl.errors import ConfigError

STEPS = 4


def _max_frame_error(frames: torch.Tensor, reference: np.ndarray) -> float:
    return float(np.abs(frames.numpy().astype(np.float64) / 255 - reference).max())


@pytest.mark.parametrize("layout", ["wan21", "wan22"])
@pytest.mark.parametrize("guidance", [1.0, 4.5])
def test_ode_rollout_equals_the_wan_pipeline(
    layout: str, guidance: float, tiny_wan_path: Path, tiny_wan22_path: Path
) -> None:
    path = tiny_wan_path if layout == "wan21" else tiny_wan22_path
    model = build_model(path)
    noise, frames = euler_video(model, PROMPTS[0], steps=STEPS, guidance=guidance, seed=3)
    assert frames.dtype == torch.uint8 and tuple(frames.shape) == (1, FRAMES, SIZE, SIZE, 3)
    reference = pipeline_frames(load_pipe(path), PROMPTS[0], noise, steps=STEPS, guidance=guidance)
    assert _max_frame_error(frames, reference) <= 1 / 255
    assert float(frames.float().std()) > 1.0  # not a constant video that would match anything


def test_two_experts_are_routed_as_the_pipeline_routes_them(tiny_wan22_path: Path) -> None:
    """Shift 3 over 4 steps gives timesteps 1000, 857.7, 602.2, 8.9: boundary 875 sends the first to the high-noise
    expert and the other three to the low-noise one (one call of both CFG halves each); with the experts swapped the
    video differs from the pipeline's."""
    model = build_model(tiny_wan22_path)
    assert model.boundary_timestep == pytest.approx(875.0)
    before = dict(model.transformer_calls)
    euler_video(model, PROMPTS[0], steps=STEPS, guidance=4.5, seed=3)
    assert model.transformer_calls["transformer"] - before["transformer"] == 1
    assert model.transformer_calls["transformer_2"] - before["transformer_2"] == 3
    model.boundary_timestep = 0.0  # every step on the high-noise expert: no longer the pipeline's video
    noise, frames = euler_video(model, PROMPTS[0], steps=STEPS, guidance=4.5, seed=3)
    reference = pipeline_frames(load_pipe(tiny_wan22_path), PROMPTS[0], noise, steps=STEPS, guidance=4.5)
    assert _max_frame_error(frames, reference) > 4 / 255


def test_guidance_scale_2_drives_the_low_noise_expert(tiny_wan22_path: Path) -> None:
    """Compared on the final latents: the random text encoder moves the frames of a tiny model too little for
    the two scales to differ visibly after decoding."""
    model = build_model(tiny_wan22_path, guidance_scale_2=1.5)
    noise = initial_noise(model, 5)
    sigmas = model.sigma_schedule(STEPS, SIZE, SIZE)
    conditioning = model.encode_prompts([PROMPTS[0]], guidance_scale=4.5)
    x = noise.clone()
    with torch.no_grad():
        for i in range(STEPS):
            x = x + model.predict_velocity(x, sigmas[i].expand(1), conditioning, 4.5) * (sigmas[i + 1] - sigmas[i])
    pipe = load_pipe(tiny_wan22_path)
    kwargs = {
        "output_type": "latent",
        "height": SIZE,
        "width": SIZE,
        "num_frames": FRAMES,
        "num_inference_steps": STEPS,
    }
    reference = pipe(PROMPTS[0], guidance_scale=4.5, guidance_scale_2=1.5, latents=noise.clone(), **kwargs).frames
    torch.testing.assert_close(x, reference, rtol=1e-4, atol=1e-4)
    same_scale = pipe(PROMPTS[0], guidance_scale=4.5, latents=noise.clone(), **kwargs).frames
    assert float((x - same_scale).abs().max()) > 2e-3  # 25x the match tolerance


def test_a_batch_mixing_experts_equals_each_sample_alone(tiny_wan22_path: Path) -> None:
    """The update re-scores steps of different sigmas in one batch: each sample gets its own expert."""
    model = build_model(tiny_wan22_path)
    x = torch.cat([initial_noise(model, 1), initial_noise(model, 2)])
    sigmas = torch.tensor([0.95, 0.5])  # timesteps 950 (high noise) and 500 (low noise)
    conditioning = model.encode_prompts(PROMPTS, guidance_scale=4.5)
    with torch.no_grad():
        together = model.predict_velocity(x, sigmas, conditioning, 4.5)
        for i in range(2):
            alone = model.predict_velocity(x[i : i + 1], sigmas[i : i + 1], conditioning.index([i]), 4.5)
            torch.testing.assert_close(together[i : i + 1], alone, rtol=1e-5, atol=1e-5)


def test_latent_shape_follows_the_vae(tiny_wan_path: Path) -> None:
    model = build_model(tiny_wan_path)
    assert model.modality == "video"
    assert model.latent_shape(32, 64, num_frames=9) == (16, 3, 4, 8)
    assert model.latent_shape(32, 32) == (16, 1, 4, 4)
    with pytest.raises(ConfigError, match="4k \\+ 1"):
        model.latent_shape(32, 32, num_frames=6)
    with pytest.raises(ConfigError, match="multiples of 16"):
        model.latent_shape(40, 32, num_frames=5)


def test_unipc_flow_sigmas_are_read_from_the_scheduler() -> None:
    """The hub's Wan repositories ship UniPC with flow sigmas: the schedule is the scheduler's own sigmas."""
    from diffusers import UniPCMultistepScheduler
    from omni_rl_wan.schedule import wan_sigmas

    scheduler = UniPCMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True, flow_shift=3.0)
    sigmas = wan_sigmas(scheduler, 4)
    scheduler.set_timesteps(4)
    torch.testing.assert_close(sigmas, scheduler.sigmas.float())
    assert sigmas.shape == (5,) and float(sigmas[-1]) == 0.0
    # the shift 3 sigma / (1 + 2 sigma) pushes the schedule towards noise: the midpoint sigma is 0.75, not 0.5
    assert float(sigmas[2]) == pytest.approx(0.75, abs=2e-3)
    with pytest.raises(ConfigError, match="use_flow_sigmas"):
        wan_sigmas(UniPCMultistepScheduler(), 4)


def test_options_that_do_not_fit_the_layout_are_refused(tiny_wan_path: Path, tiny_wan22_path: Path) -> None:
    with pytest.raises(ConfigError, match="guidance_scale_2"):
        build_model(tiny_wan_path, guidance_scale_2=3.0)
    with pytest.raises(ConfigError, match="low-noise"):
        build_model(tiny_wan_path, train_experts="low_noise")
    with pytest.raises(ConfigError, match="full fine-tuning"):
        build_model(tiny_wan22_path, lora_rank=0)


@pytest.mark.parametrize("experts", ["both", "high_noise", "low_noise"])
def test_train_experts_picks_the_experts_with_lora(tiny_wan22_path: Path, experts: str) -> None:
    model = build_model(tiny_wan22_path, train_experts=experts)
    with_lora = {
        component: any("lora_" in name for name, _ in expert.named_parameters())
        for component, expert in model.experts.items()
    }
    expected = {"both": (True, True), "high_noise": (True, False), "low_noise": (False, True)}[experts]
    assert (with_lora["transformer"], with_lora["transformer_2"]) == expected
    trained = {id(p) for p in model.trainable_parameters()}
    assert trained and all(p.requires_grad for p in model.trainable_parameters())
    frozen = [p for n, p in model.transformer.named_parameters() if id(p) not in trained]
    assert not any(p.requires_grad for p in frozen)
