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

#: image size of the tests: 8x8 latents with the tiny pipeline's 4x VAE, 16 image tokens
SIZE = 32
PROMPTS = ['a red cat holding a sign that says "hi"', "a dog", "two blue squares on a green background"]
#: the negative prompt of classic CFG in these tests (the model's default is "")
NEGATIVE = "blurry"


@pytest.fixture(scope="session")
def tiny_flux_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """FLUX.1-dev's layout: guidance embeddings and the resolution-dependent shift."""
    from omni_rl_flux.tiny import build_tiny_flux_pipeline

    return build_tiny_flux_pipeline(tmp_path_factory.mktemp("flux") / "tiny-flux-dev", seed=0)


@pytest.fixture(scope="session")
def tiny_schnell_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """FLUX.1-schnell's layout: no guidance embeddings, no shift."""
    from omni_rl_flux.tiny import build_tiny_flux_pipeline

    return build_tiny_flux_pipeline(tmp_path_factory.mktemp("flux") / "tiny-flux-schnell", seed=1, variant="schnell")


def load_pipe(path: Path) -> Any:
    """The tiny pipeline loaded by diffusers alone: the ground truth the model must reproduce."""
    from diffusers import FluxPipeline

    pipe = FluxPipeline.from_pretrained(path)
    pipe.set_progress_bar_config(disable=True)
    return pipe


@pytest.fixture(scope="session")
def base_pipe(tiny_flux_path: Path) -> Any:
    return load_pipe(tiny_flux_path)


def build_model(path: Path, **options: Any) -> Any:
    """The model as a run builds it (through the plugin's factory and option structuring), float32, CPU."""
    from omni_rl_flux import hooks

    from omni_rl.config import structure_options
    from omni_rl.context import BuildContext

    (spec,) = [s for s in hooks.omni_rl_models() if s.name == "flux"]
    merged = {"path": str(path), "lora_rank": 4, "negative_prompt": NEGATIVE, **options}
    return spec.factory(structure_options(spec, merged), BuildContext(device="cpu"))


@pytest.fixture(scope="session")
def flux_model(tiny_flux_path: Path) -> Any:
    return build_model(tiny_flux_path)


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


def pipe_sample(
    pipe: Any, prompt: str, *, steps: int, cfg: float, seed: int, guidance: float = 3.5, size: int = SIZE
) -> Any:
    """FluxPipeline's own (packed latents, uint8 images): ``guidance`` is its guidance_scale (the embedding),
    ``cfg`` its true_cfg_scale with the tests' negative prompt."""
    import torch

    def run(output_type: str) -> Any:
        return pipe(
            prompt,
            negative_prompt=NEGATIVE if cfg > 1 else None,
            true_cfg_scale=cfg,
            guidance_scale=guidance,
            num_inference_steps=steps,
            generator=torch.Generator().manual_seed(seed),
            height=size,
            width=size,
            output_type=output_type,
        ).images

    images = torch.from_numpy(run("np"))
    return run("latent"), (images * 255).round().to(torch.uint8)
