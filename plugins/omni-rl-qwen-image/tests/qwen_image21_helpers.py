"""Shared test helpers and fixtures of the ``qwen_image21`` tests. A uniquely named module, not conftest: the suite
runs every plugin's tests in one pytest, where ``from conftest import`` can find another plugin's conftest."""

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

#: image size of the tests: 4x4 latents with the 16x VAE, 16 image tokens
SIZE = 64
#: prompts of different token counts
PROMPTS = ['a red cat holding a sign that says "hi"', "a dog", "two blue squares on a green background"]


@pytest.fixture(scope="session")
def tiny_q21_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from omni_rl_qwen_image.qwen21_tiny import build_tiny_qwen_image21_pipeline

    return build_tiny_qwen_image21_pipeline(tmp_path_factory.mktemp("qwen21") / "tiny-qwen-image-21", seed=0)


def load_pipe21(path: Path, **components: Any) -> Any:
    """The tiny pipeline loaded by diffusers (the text-only processor stand-in for ``Qwen3VLProcessor``, which
    needs torchvision): the ground truth the model must reproduce."""
    from diffusers import QwenImage21Pipeline
    from omni_rl_qwen_image.qwen21_prompts import TextProcessor

    processor = TextProcessor.from_pretrained(Path(path) / "processor")
    pipe = QwenImage21Pipeline.from_pretrained(path, processor=processor, **components)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def build_model21(path: Path, **options: Any) -> Any:
    """The model as a run builds it (through the plugin's factory and option structuring), float32, CPU."""
    from omni_rl_qwen_image import hooks

    from omni_rl.config import structure_options
    from omni_rl.context import BuildContext

    spec = next(s for s in hooks.omni_rl_models() if s.name == "qwen_image21")
    merged = {"path": str(path), "lora_rank": 4, **options}
    return spec.factory(structure_options(spec, merged), BuildContext(device="cpu"))


@pytest.fixture(scope="session")
def q21_model(tiny_q21_path: Path) -> Any:
    return build_model21(tiny_q21_path)


def pipe21_sample(pipe: Any, prompt: str, *, steps: int, cfg: float, seed: int, size: int = SIZE, **kw: Any) -> Any:
    """QwenImage21Pipeline's own uint8 RGB images (negative prompt " " when cfg > 1)."""
    import torch

    extra = {"negative_prompt": " ", "true_cfg_scale": cfg} if cfg > 1 else {}
    images = pipe(
        prompt,
        num_inference_steps=steps,
        generator=torch.Generator().manual_seed(seed),
        height=size,
        width=size,
        output_type="np",
        **extra,
        **kw,
    ).images
    return (torch.from_numpy(images[..., :3]) * 255).round().to(torch.uint8)


def euler21(model: Any, prompt: str, *, steps: int, cfg: float, seed: int, size: int = SIZE) -> Any:
    """The model's own Euler loop from the pipeline's initial noise (randn of (1, 1, C, h, w), flattened)."""
    import torch

    conditioning = model.encode_prompts([prompt], guidance_scale=cfg)
    sigmas = model.sigma_schedule(steps, size, size)
    c, h, w = model.latent_shape(size, size)
    x = torch.randn((1, 1, c, h, w), generator=torch.Generator().manual_seed(seed))[:, 0]
    with torch.no_grad():
        for i in range(steps):
            x = x + model.predict_velocity(x, sigmas[i].expand(1), conditioning, cfg) * (sigmas[i + 1] - sigmas[i])
    return model.decode(x)
