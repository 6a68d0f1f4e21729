"""Shared helpers and fixtures of the ``flux_kontext`` tests: the tiny Kontext pipeline, the model built through the
plugin's factory, source images, and ``FluxKontextPipeline.__call__`` as the ground truth. (A uniquely named module,
not conftest, for the reason flux_helpers gives.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import flux_helpers  # noqa: F401 - sets the offline environment before diffusers is imported
import numpy as np
import pytest

#: the target size of these tests: 8x8 latents with the tiny 4x VAE, 16 target tokens
SIZE = 32
#: the negative prompt of true CFG in these tests
NEGATIVE = "blurry"


def source(height: int, width: int, seed: int = 0) -> np.ndarray:
    """A random uint8 (H, W, 3) source image, as the prompt source loads one."""
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)


@pytest.fixture(scope="session")
def tiny_kontext_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from omni_rl_flux.kontext_tiny import build_tiny_kontext_pipeline

    return build_tiny_kontext_pipeline(tmp_path_factory.mktemp("kontext") / "tiny-flux-kontext", seed=0)


def kontext_spec() -> Any:
    from omni_rl_flux import hooks

    (spec,) = [s for s in hooks.omni_rl_models() if s.name == "flux_kontext"]
    return spec


def build_kontext(path: Path, **options: Any) -> Any:
    """The model as a run builds it (the plugin's factory and option structuring), float32, CPU, LoRA rank 4."""
    from omni_rl.config import structure_options
    from omni_rl.context import BuildContext

    spec = kontext_spec()
    merged = {"path": str(path), "lora_rank": 4, "negative_prompt": NEGATIVE, **options}
    return spec.factory(structure_options(spec, merged), BuildContext(device="cpu"))


@pytest.fixture(scope="session")
def kontext_model(tiny_kontext_path: Path) -> Any:
    return build_kontext(tiny_kontext_path)


def load_kontext_pipe(path: Path) -> Any:
    """The tiny pipeline loaded by diffusers alone."""
    from diffusers import FluxKontextPipeline

    pipe = FluxKontextPipeline.from_pretrained(path)
    pipe.set_progress_bar_config(disable=True)
    return pipe


@pytest.fixture(scope="session")
def kontext_pipe(tiny_kontext_path: Path) -> Any:
    return load_kontext_pipe(tiny_kontext_path)


def pipe_edit(
    pipe: Any,
    prompt: str,
    image: np.ndarray,
    *,
    steps: int,
    seed: int,
    guidance: float = 3.5,
    cfg: float = 1.0,
    height: int = SIZE,
    width: int = SIZE,
) -> tuple[Any, Any]:
    """FluxKontextPipeline's own (packed latents, uint8 images) for one source given as a PIL image (as a user
    passes it). ``_auto_resize=False`` keeps the condition at its own size floored to 2 x the VAE factor (the
    model's rule for a source within ``condition_max_area``); ``max_area = height x width`` keeps the output at
    the requested size (``__call__`` rescales the output to ``max_area``, 1 MP by default)."""
    import torch
    from PIL import Image

    def run(output_type: str) -> Any:
        return pipe(
            image=Image.fromarray(image),
            prompt=prompt,
            negative_prompt=NEGATIVE if cfg > 1 else None,
            true_cfg_scale=cfg,
            guidance_scale=guidance,
            num_inference_steps=steps,
            generator=torch.Generator().manual_seed(seed),
            height=height,
            width=width,
            max_area=height * width,
            _auto_resize=False,
            output_type=output_type,
        ).images

    images = torch.from_numpy(run("np"))
    return run("latent"), (images * 255).round().to(torch.uint8)


def euler_edit(model: Any, prompt: str, image: np.ndarray, *, steps: int, seed: int, cfg: float = 1.0) -> Any:
    """x <- x + v (sigma' - sigma) over the model's schedule from seeded noise, with one source: (latents, images)."""
    import torch

    conditioning = model.encode_conditions([prompt], [(image,)], guidance_scale=cfg)
    sigmas = model.sigma_schedule(steps, SIZE, SIZE)
    x = torch.randn((1, *model.latent_shape(SIZE, SIZE)), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        for i in range(steps):
            velocity = model.predict_velocity(x, sigmas[i].expand(1), conditioning, cfg)
            x = x + velocity * (sigmas[i + 1] - sigmas[i])
    return x, model.decode(x)
