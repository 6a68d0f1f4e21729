"""The ``wan_i2v`` and ``wan_ti2v`` models reproduce ``WanImageToVideoPipeline.__call__``: an Euler loop over the
model's schedule and velocity, conditioned through ``encode_conditions``, gives the pipeline's frames within one
level (float32, tiny random pipelines of the three layouts, CFG on and off), and its final latents, TI2V's first
frame included; the first frame reaches the transformer; each (first frame, size) is VAE-encoded once; TI2V without
a first frame is text-to-video; and each model refuses the layouts it cannot run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from wan_i2v_helpers import (
    FRAMES,
    LAYOUTS,
    PROMPTS,
    STEPS,
    build_i2v_model,
    euler_video,
    first_frame,
    frame_error,
    initial_noise,
    load_i2v_pipe,
    pipeline_frames,
)

from omni_rl.errors import ConfigError, RuntimeFailure


@pytest.fixture(scope="module")
def models(tiny_i2v_paths: dict[str, Path]) -> dict[str, object]:
    return {key: build_i2v_model(tiny_i2v_paths[key], layout.model) for key, layout in LAYOUTS.items()}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("guidance", [1.0, 4.5])
def test_ode_rollout_equals_the_pipeline(
    models: dict[str, object],
    tiny_i2v_paths: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    layout: str,
    guidance: float,
) -> None:
    size = LAYOUTS[layout].size
    image = first_frame(1)
    noise, latents, frames = euler_video(models[layout], PROMPTS[0], image, size=size, guidance=guidance, seed=3)
    assert frames.dtype == torch.uint8 and tuple(frames.shape) == (1, FRAMES, size, size, 3)
    pipe = load_i2v_pipe(tiny_i2v_paths[layout], monkeypatch)
    assert frame_error(frames, pipeline_frames(pipe, image, PROMPTS[0], noise, size=size, guidance=guidance)) <= 1
    assert float(frames.float().std()) > 1.0  # not a constant video that would match anything
    # the final latents too: for TI2V the pipeline writes the condition over its first frame, where ours arrived
    reference = pipeline_frames(pipe, image, PROMPTS[0], noise, size=size, guidance=guidance, output_type="latent")
    torch.testing.assert_close(latents, reference, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_the_first_frame_changes_the_video(models: dict[str, object], layout: str) -> None:
    size = LAYOUTS[layout].size
    _, _, one = euler_video(models[layout], PROMPTS[0], first_frame(1), size=size, guidance=4.5, seed=3)
    _, _, other = euler_video(models[layout], PROMPTS[0], first_frame(2), size=size, guidance=4.5, seed=3)
    assert float((one.float() - other.float()).abs().max()) > 4


def test_ti2v_first_frame_tokens_see_timestep_zero(models: dict[str, object]) -> None:
    """The pipeline's per-token timesteps: 0 on the first latent frame's tokens of a conditioned sample, t on the
    rest, and t everywhere for a sample without a first frame; its first latent frame is the condition."""
    model = models["wan22_ti2v"]
    conditioning = model.encode_conditions(PROMPTS, [[first_frame(1)], []], guidance_scale=1.0)
    x = torch.cat([initial_noise(model, 64, 1), initial_noise(model, 64, 2)])
    hidden, timestep, extra = model._transformer_inputs(x, torch.tensor([700.0, 700.0]), conditioning, None)
    per_frame = (x.shape[3] // 2) * (x.shape[4] // 2)
    assert timestep.shape == (2, x.shape[2] * per_frame) and not extra
    assert bool((timestep[0, :per_frame] == 0).all()) and bool((timestep[0, per_frame:] == 700).all())
    assert bool((timestep[1] == 700).all())
    condition, present = model._conditions(conditioning, None, x.shape)
    assert present.tolist() == [True, False]
    assert torch.equal(hidden[0, :, :1], condition[0]) and torch.equal(hidden[:, :, 1:], x[:, :, 1:])
    assert torch.equal(hidden[1], x[1])


def test_ti2v_without_a_first_frame_is_text_to_video(
    models: dict[str, object], tiny_i2v_paths: dict[str, Path]
) -> None:
    """``wan_ti2v`` takes 0 or 1 first frames: a row without one samples what ``WanPipeline`` (text-to-video on the
    same directory) samples, and a batch mixing both gives each sample its velocity alone."""
    from diffusers import WanPipeline

    model = models["wan22_ti2v"]
    noise, _, frames = euler_video(model, PROMPTS[1], None, size=64, guidance=4.5, seed=5)
    pipe = WanPipeline.from_pretrained(tiny_i2v_paths["wan22_ti2v"])
    pipe.set_progress_bar_config(disable=True)
    reference = pipe(
        PROMPTS[1], height=64, width=64, num_frames=FRAMES, num_inference_steps=STEPS, guidance_scale=4.5,
        latents=noise.clone(), output_type="np",
    ).frames  # fmt: skip
    assert frame_error(frames, reference) <= 1
    mixed = model.encode_conditions(PROMPTS, [[first_frame(1)], []], guidance_scale=4.5)
    x = torch.cat([initial_noise(model, 64, 1), initial_noise(model, 64, 2)])
    sigmas = torch.tensor([0.9, 0.4])
    with torch.no_grad():
        together = model.predict_velocity(x, sigmas, mixed, 4.5)
        for i in range(2):
            alone = model.predict_velocity(x[i : i + 1], sigmas[i : i + 1], mixed.index([i]), 4.5)
            torch.testing.assert_close(together[i : i + 1], alone, rtol=1e-5, atol=1e-5)


def test_ti2v_first_frame_velocity_points_at_the_condition(models: dict[str, object]) -> None:
    """v = (x - c) / sigma on a conditioned first latent frame: its x0 prediction x - sigma v is the condition, and it
    does not depend on the weights (no gradient reaches them from it)."""
    model = models["wan22_ti2v"]
    conditioning = model.encode_conditions(PROMPTS[:1], [[first_frame(1)]], guidance_scale=1.0)
    x = initial_noise(model, 64, 4)
    sigma = torch.tensor([0.6])
    condition, _ = model._conditions(conditioning, None, x.shape)
    velocity = model.predict_velocity(x, sigma, conditioning, 1.0)
    torch.testing.assert_close(x[:, :, :1] - 0.6 * velocity[:, :, :1], condition, rtol=1e-5, atol=1e-5)
    velocity[:, :, :1].sum().backward()
    assert all(p.grad is None or not bool(p.grad.any()) for p in model.trainable_parameters())


def test_each_first_frame_and_size_is_encoded_once(tiny_i2v_paths: dict[str, Path]) -> None:
    """The VAE encodes a (first frame, output size) pair at its first transformer call and the rest of the rollout
    and the update reuse it; another size is another pair; with the cache off every call re-encodes, to the same
    velocity."""
    model = build_i2v_model(tiny_i2v_paths["wan21_i2v"], "wan_i2v")
    conditioning = model.encode_conditions(PROMPTS, [[first_frame(1)], [first_frame(2)]], guidance_scale=4.5)
    x = torch.cat([initial_noise(model, 32, 1), initial_noise(model, 32, 2)])
    with torch.no_grad():
        first = model.predict_velocity(x, torch.tensor([0.9, 0.9]), conditioning, 4.5)
        assert model.condition_encodes == 2
        model.predict_velocity(x, torch.tensor([0.5, 0.5]), conditioning.index([1, 0]), 4.5)
        assert model.condition_encodes == 2
        model.predict_velocity(
            torch.randn(2, *model.latent_shape(48, 32, num_frames=9)), torch.tensor([0.5]), conditioning, 4.5
        )
        assert model.condition_encodes == 4
        uncached = build_i2v_model(tiny_i2v_paths["wan21_i2v"], "wan_i2v", condition_cache_size=0)
        again = [uncached.predict_velocity(x, torch.tensor([0.9, 0.9]), conditioning, 4.5) for _ in range(2)]
    assert uncached.condition_encodes == 4
    torch.testing.assert_close(again[0], first, rtol=0, atol=0)
    torch.testing.assert_close(again[1], first, rtol=0, atol=0)


def test_two_experts_are_routed_at_the_i2v_boundary(models: dict[str, object]) -> None:
    """Wan2.2 I2V-A14B's boundary_ratio 0.9: shift 3 over 4 steps gives timesteps 1000, 857.7, 602.2, 8.9, so the
    first goes to the high-noise expert and the other three to the low-noise one."""
    model = models["wan22_i2v"]
    assert model.boundary_timestep == pytest.approx(900.0) and model.image_encoder is None
    before = dict(model.transformer_calls)
    euler_video(model, PROMPTS[0], first_frame(1), size=32, guidance=4.5, seed=3)
    assert model.transformer_calls["transformer"] - before["transformer"] == 1
    assert model.transformer_calls["transformer_2"] - before["transformer_2"] == 3


def test_wan_i2v_needs_one_first_frame(models: dict[str, object]) -> None:
    model = models["wan21_i2v"]
    x = initial_noise(model, 32, 1)
    with pytest.raises(RuntimeFailure, match="without first frames"):
        model.predict_velocity(x, torch.tensor([0.5]), model.encode_prompts(PROMPTS[:1], guidance_scale=1.0), 1.0)
    with pytest.raises(RuntimeFailure, match="takes 1 first frame"):
        model.encode_conditions(PROMPTS[:1], [[]], guidance_scale=1.0)
    with pytest.raises(RuntimeFailure, match="takes 1 first frame"):
        model.encode_conditions(PROMPTS[:1], [[first_frame(1), first_frame(2)]], guidance_scale=1.0)
    with pytest.raises(RuntimeFailure, match="uint8"):
        model.encode_conditions(PROMPTS[:1], [[np.zeros((8, 8, 3), dtype=np.float32)]], guidance_scale=1.0)


def test_each_model_refuses_the_layouts_it_cannot_run(tiny_i2v_paths: dict[str, Path], tiny_wan_path: Path) -> None:
    with pytest.raises(ConfigError, match='name = "wan_ti2v"'):
        build_i2v_model(tiny_i2v_paths["wan22_ti2v"], "wan_i2v")
    with pytest.raises(ConfigError, match="expand_timesteps = false"):
        build_i2v_model(tiny_i2v_paths["wan21_i2v"], "wan_ti2v")
    with pytest.raises(ConfigError, match=r'(?s)takes 16 input channels, not the 36.*name = "wan"'):
        build_i2v_model(tiny_wan_path, "wan_i2v")  # a text-to-video WanPipeline
    with pytest.raises(ConfigError, match="holds a WanImageToVideoPipeline, not a WanPipeline"):
        build_i2v_model(tiny_i2v_paths["wan21_i2v"], "wan")
    with pytest.raises(ConfigError, match="max_sequence_length"):
        build_i2v_model(tiny_i2v_paths["wan21_i2v"], "wan_i2v", max_sequence_length=256)
