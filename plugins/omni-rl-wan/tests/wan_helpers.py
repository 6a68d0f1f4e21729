"""Shared test helpers and fixtures. A uniquely named module, not conftest: the suite runs every plugin's tests
in one pytest, where ``from conftest import`` can find another plugin's conftest."""

from __future__ import annotations

import os

# Before diffusers/transformers are imported anywhere: never reach for a hub, and keep the output readable.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("DIFFUSERS_VERBOSITY", "error")

from pathlib import Path
from typing import Any

import pytest

#: frame size and count of the tests: 4x4 latents (8x VAE) and 2 latent frames (4x in time after the first)
SIZE = 32
FRAMES = 5
PROMPTS = ["a red circle", "two blue squares on a green background"]


@pytest.fixture(scope="session")
def tiny_wan_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Wan2.1's layout: one transformer."""
    from omni_rl_wan.tiny import build_tiny_wan_pipeline

    return build_tiny_wan_pipeline(tmp_path_factory.mktemp("wan") / "tiny-wan", seed=0)


@pytest.fixture(scope="session")
def tiny_wan22_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Wan2.2 A14B's layout: a high-noise transformer and a low-noise transformer_2 split at boundary_ratio."""
    from omni_rl_wan.tiny import build_tiny_wan_pipeline

    return build_tiny_wan_pipeline(tmp_path_factory.mktemp("wan22") / "tiny-wan22", seed=0, two_experts=True)


def build_model(path: Path, **options: Any) -> Any:
    """The model as a run builds it (through the plugin's factory and option structuring), float32, CPU."""
    from omni_rl_wan import hooks

    from omni_rl.config import structure_options
    from omni_rl.context import BuildContext

    (spec,) = [s for s in hooks.omni_rl_models() if s.name == "wan"]
    merged = {"path": str(path), "lora_rank": 4, **options}
    return spec.factory(structure_options(spec, merged), BuildContext(device="cpu"))


def load_pipe(path: Path) -> Any:
    """The pipeline loaded by diffusers alone: the ground truth the model must reproduce."""
    from diffusers import WanPipeline

    pipe = WanPipeline.from_pretrained(path)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def initial_noise(model: Any, seed: int, frames: int = FRAMES) -> Any:
    import torch

    shape = model.latent_shape(SIZE, SIZE, num_frames=frames)
    return torch.randn((1, *shape), generator=torch.Generator().manual_seed(seed))


def euler_video(model: Any, prompt: str, *, steps: int, guidance: float, seed: int) -> tuple[Any, Any]:
    """x <- x + v (sigma' - sigma) over the model's schedule from seeded noise: (initial noise, uint8 frames)."""
    import torch

    noise = initial_noise(model, seed)
    x = noise.clone()
    sigmas = model.sigma_schedule(steps, SIZE, SIZE)
    conditioning = model.encode_prompts([prompt], guidance_scale=guidance)
    with torch.no_grad():
        for i in range(steps):
            velocity = model.predict_velocity(x, sigmas[i].expand(1), conditioning, guidance)
            x = x + velocity * (sigmas[i + 1] - sigmas[i])
        return noise, model.decode(x)


def pipeline_frames(pipe: Any, prompt: str, noise: Any, *, steps: int, guidance: float, **kwargs: Any) -> Any:
    """WanPipeline's own frames (float in [0, 1], (1, F, H, W, 3)) from the same initial latents."""
    return pipe(
        prompt,
        height=SIZE,
        width=SIZE,
        num_frames=FRAMES,
        num_inference_steps=steps,
        guidance_scale=guidance,
        latents=noise.clone(),
        output_type="np",
        **kwargs,
    ).frames
