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
#: prompts of different token counts
PROMPTS = ['a red cat holding a sign that says "hi"', "a dog", "two blue squares on a green background"]


@pytest.fixture(scope="session")
def tiny_z_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from omni_rl_z_image.tiny import build_tiny_z_image_pipeline

    return build_tiny_z_image_pipeline(tmp_path_factory.mktemp("zimage") / "tiny-z-image", seed=0)


@pytest.fixture(scope="session")
def tiny_turbo_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from omni_rl_z_image.tiny import build_tiny_z_image_pipeline

    return build_tiny_z_image_pipeline(tmp_path_factory.mktemp("zfewstep") / "tiny-z-image", seed=1, variant="turbo")


def load_pipe(path: Path) -> Any:
    """The tiny pipeline loaded by diffusers alone: the ground truth the model must reproduce."""
    from diffusers import ZImagePipeline

    pipe = ZImagePipeline.from_pretrained(path)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def build_model(path: Path, **options: Any) -> Any:
    """The model as a run builds it (through the plugin's factory and option structuring), float32, CPU."""
    from omni_rl_z_image import hooks

    from omni_rl.config import structure_options
    from omni_rl.context import BuildContext

    spec = next(s for s in hooks.omni_rl_models() if s.name == "z_image")
    merged = {"path": str(path), "lora_rank": 4, **options}
    return spec.factory(structure_options(spec, merged), BuildContext(device="cpu"))


@pytest.fixture(scope="session")
def z_model(tiny_z_path: Path) -> Any:
    return build_model(tiny_z_path)


def pipe_sample(pipe: Any, prompt: str, *, steps: int, guidance: float, seed: int, size: int = SIZE, **kw: Any) -> Any:
    """ZImagePipeline's own uint8 images (its default negative prompt "" when guidance > 0)."""
    import torch

    images = pipe(
        prompt,
        guidance_scale=guidance,
        num_inference_steps=steps,
        generator=torch.Generator().manual_seed(seed),
        height=size,
        width=size,
        output_type="np",
        **kw,
    ).images
    return (torch.from_numpy(images) * 255).round().to(torch.uint8)
