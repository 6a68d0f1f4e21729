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
#: prompts of different token counts (the first two differ by several tokens)
PROMPTS = ['a red cat holding a sign that says "hi"', "a dog", "two blue squares on a green background"]


@pytest.fixture(scope="session")
def tiny_qwen_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from omni_rl_qwen_image.tiny import build_tiny_qwen_image_pipeline

    return build_tiny_qwen_image_pipeline(tmp_path_factory.mktemp("qwen") / "tiny-qwen-image", seed=0)


@pytest.fixture(scope="session")
def base_pipe(tiny_qwen_path: Path) -> Any:
    """The tiny pipeline loaded by diffusers alone: the ground truth the model must reproduce."""
    from diffusers import QwenImagePipeline

    pipe = QwenImagePipeline.from_pretrained(tiny_qwen_path)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def build_model(path: Path, **options: Any) -> Any:
    """The model as a run builds it (through the plugin's factory and option structuring), float32, CPU."""
    from omni_rl_qwen_image import hooks

    from omni_rl.config import structure_options
    from omni_rl.context import BuildContext

    spec = next(s for s in hooks.omni_rl_models() if s.name == "qwen_image")
    merged = {"path": str(path), "lora_rank": 4, **options}
    return spec.factory(structure_options(spec, merged), BuildContext(device="cpu"))


@pytest.fixture(scope="session")
def qwen_model(tiny_qwen_path: Path) -> Any:
    return build_model(tiny_qwen_path)


def euler_sample(model: Any, prompt: str, *, steps: int, guidance: float, seed: int, size: int = SIZE) -> Any:
    """x <- x + v (sigma' - sigma) over the model's schedule from seeded noise: (final latents, uint8 images)."""
    import torch

    conditioning = model.encode_prompts([prompt], guidance_scale=guidance)
    sigmas = model.sigma_schedule(steps, size, size)
    x = torch.randn((1, *model.latent_shape(size, size)), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        for i in range(steps):
            velocity = model.predict_velocity(x, sigmas[i].expand(1), conditioning, guidance)
            x = x + velocity * (sigmas[i + 1] - sigmas[i])
    return x, model.decode(x)


def pipe_sample(pipe: Any, prompt: str, *, steps: int, guidance: float, seed: int, size: int = SIZE) -> Any:
    """QwenImagePipeline's own (packed latents, uint8 images): true CFG with the negative prompt " " when
    guidance > 1, as the model's default negative prompt."""
    import torch

    def run(output_type: str) -> Any:
        return pipe(
            prompt,
            negative_prompt=" " if guidance > 1 else None,
            true_cfg_scale=guidance,
            num_inference_steps=steps,
            generator=torch.Generator().manual_seed(seed),
            height=size,
            width=size,
            output_type=output_type,
        ).images

    images = torch.from_numpy(run("np"))
    return run("latent"), (images * 255).round().to(torch.uint8)
