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

#: image size of the tests: 8x8 VAE latents with the tiny 4x VAE, 4x4 patchified, 16 image tokens
SIZE = 32
PROMPTS = ['a red cat holding a sign that says "hi"', "a dog", "two blue squares on a green background"]
#: Qwen3 tokens per prompt in the tests (the pipeline's default is 512; fewer keep the CPU tests quick)
SEQ = 64


@pytest.fixture(scope="session")
def tiny_base_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """FLUX.2-klein-base's layout: CFG as the pipeline applies it."""
    from omni_rl_flux2.tiny import build_tiny_flux2_klein_pipeline

    return build_tiny_flux2_klein_pipeline(tmp_path_factory.mktemp("flux2") / "tiny-klein-base", seed=0)


@pytest.fixture(scope="session")
def tiny_distilled_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """FLUX.2-klein's step-distilled layout (is_distilled): no CFG."""
    from omni_rl_flux2.tiny import build_tiny_flux2_klein_pipeline

    path = tmp_path_factory.mktemp("flux2") / "tiny-klein-distilled"
    return build_tiny_flux2_klein_pipeline(path, seed=1, variant="distilled")


def load_pipe(path: Path) -> Any:
    """The tiny pipeline loaded by diffusers alone: the ground truth the model must reproduce."""
    from diffusers import Flux2KleinPipeline

    pipe = Flux2KleinPipeline.from_pretrained(path)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def build_model(path: Path, **options: Any) -> Any:
    """The model as a run builds it (through the plugin's factory and option structuring), float32, CPU."""
    from omni_rl_flux2 import hooks

    from omni_rl.config import structure_options
    from omni_rl.context import BuildContext

    (spec,) = [s for s in hooks.omni_rl_models() if s.name == "flux2_klein"]
    merged = {"path": str(path), "lora_rank": 4, "max_sequence_length": SEQ, **options}
    return spec.factory(structure_options(spec, merged), BuildContext(device="cpu"))


@pytest.fixture(scope="session")
def base_model(tiny_base_path: Path) -> Any:
    return build_model(tiny_base_path)


def euler_sample(model: Any, prompt: str, *, steps: int, cfg: float, seed: int, size: int = SIZE) -> Any:
    """x <- x + v (sigma' - sigma) over the model's schedule from seeded noise: (final latents, uint8 images)."""
    import torch

    conditioning = model.encode_prompts([prompt], guidance_scale=cfg)
    sigmas = model.sigma_schedule(steps, size, size)
    x = torch.randn((1, *model.latent_shape(size, size)), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        for i in range(steps):
            velocity = model.predict_velocity(x, sigmas[i].expand(1), conditioning, cfg)
            x = x + velocity * (sigmas[i + 1] - sigmas[i])
    return x, model.decode(x)


def pipe_images(pipe: Any, prompt: str, *, steps: int, cfg: float, seed: int, size: int = SIZE) -> Any:
    """Flux2KleinPipeline's own uint8 images (B, H, W, 3) for ``guidance_scale = cfg``."""
    import torch

    images = pipe(
        prompt=prompt,
        guidance_scale=cfg,
        num_inference_steps=steps,
        generator=torch.Generator().manual_seed(seed),
        height=size,
        width=size,
        max_sequence_length=SEQ,
        output_type="np",
    ).images
    return (torch.from_numpy(images) * 255).round().to(torch.uint8)
