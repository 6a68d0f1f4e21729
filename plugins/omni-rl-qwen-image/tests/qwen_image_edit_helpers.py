"""Shared helpers and fixtures of the Qwen-Image-Edit tests (a uniquely named module, as qwen_image_helpers).

The edit pipelines' own ``__call__`` is the ground truth. Two things stand between it and a CPU test, and the
helpers handle both the same way every test does:

- its ``processor`` (``Qwen2VLProcessor``) cannot be built without torchvision, so the pipelines are loaded with
  ``processor=None`` and given the plugin's :class:`~omni_rl_qwen_image.edit_prompts.VisionTextProcessor`, which
  returns the tensors ``Qwen2VLProcessor`` returns (checked against transformers' own ``Qwen2VLProcessor.__call__``
  in test_qwen_image_edit_prompts.py);
- it resizes every condition image to ~1 MP (``calculate_dimensions(1024 * 1024, ...)``; Plus: ``VAE_IMAGE_SIZE``
  and, for the VLM copy, ``CONDITION_IMAGE_SIZE``), which for a tiny model is 16384 condition tokens. The
  helpers set the pipeline's area to the model's ``condition_max_area`` (and Plus's VLM area to
  ``vlm_condition_max_area``) for the duration of the call: the pipeline then computes the sizes the model does,
  with its own code.
"""

from __future__ import annotations

import contextlib
import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("DIFFUSERS_VERBOSITY", "error")

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

#: target size of the tests: 8x8 latents with the tiny 4x VAE, 16 target tokens
SIZE = 32
#: the condition areas the tests use (the pipelines' are 1024 * 1024 and Plus's VLM 384 * 384): a 96 x 64 source
#: keeps its size for the VAE (96 condition tokens), a square one becomes 64 x 64 (64 tokens)
VAE_AREA = 64 * 96
VLM_AREA = 64 * 64


def source(height: int, width: int, seed: int) -> np.ndarray:
    """A random uint8 (H, W, 3) condition image, as the prompt sources load them."""
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)


@pytest.fixture(scope="session")
def tiny_edit_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from omni_rl_qwen_image.edit_tiny import build_tiny_qwen_image_edit_pipeline

    return build_tiny_qwen_image_edit_pipeline(tmp_path_factory.mktemp("qwen-edit") / "tiny-edit", seed=0)


@pytest.fixture(scope="session")
def tiny_plus_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2511-like Plus pipeline: ``zero_cond_t`` in the transformer's config."""
    from omni_rl_qwen_image.edit_tiny import build_tiny_qwen_image_edit_pipeline

    path = tmp_path_factory.mktemp("qwen-edit-plus") / "tiny-edit-plus"
    return build_tiny_qwen_image_edit_pipeline(path, plus=True, zero_cond_t=True, seed=1)


def load_pipe(path: Path) -> Any:
    """The pipeline as diffusers loads it, but for the processor: the stand-in (see the module docstring)."""
    import diffusers
    from omni_rl_qwen_image.edit_prompts import VisionTextProcessor

    index = (path / "model_index.json").read_text()
    name = "QwenImageEditPlusPipeline" if "QwenImageEditPlusPipeline" in index else "QwenImageEditPipeline"
    pipe = getattr(diffusers, name).from_pretrained(path, processor=None)
    pipe.processor = VisionTextProcessor.from_pretrained(path / "processor")
    pipe.set_progress_bar_config(disable=True)
    return pipe


@pytest.fixture(scope="session")
def edit_pipe(tiny_edit_path: Path) -> Any:
    return load_pipe(tiny_edit_path)


@pytest.fixture(scope="session")
def plus_pipe(tiny_plus_path: Path) -> Any:
    return load_pipe(tiny_plus_path)


def build_edit_model(path: Path, *, plus: bool, **options: Any) -> Any:
    """The model as a run builds it (factory and option structuring), float32, CPU, at the tests' areas."""
    from omni_rl_qwen_image import hooks

    from omni_rl.config import structure_options
    from omni_rl.context import BuildContext

    name = "qwen_image_edit_plus" if plus else "qwen_image_edit"
    spec = next(s for s in hooks.omni_rl_models() if s.name == name)
    areas = {"condition_max_area": VAE_AREA, **({"vlm_condition_max_area": VLM_AREA} if plus else {})}
    merged = {"path": str(path), "lora_rank": 4, "lora_alpha": 8.0, **areas, **options}
    return spec.factory(structure_options(spec, merged), BuildContext(device="cpu"))


@pytest.fixture(scope="session")
def edit_model(tiny_edit_path: Path) -> Any:
    return build_edit_model(tiny_edit_path, plus=False)


@pytest.fixture(scope="session")
def plus_model(tiny_plus_path: Path) -> Any:
    return build_edit_model(tiny_plus_path, plus=True)


@contextlib.contextmanager
def pipeline_areas(vae_area: int = VAE_AREA, vlm_area: int = VLM_AREA) -> Iterator[None]:
    """The edit pipelines' condition areas set to the tests' for the body (module globals their ``__call__``
    reads at call time): Edit's ``calculate_dimensions(1024 * 1024, ...)`` with ``vae_area``, Plus's
    ``VAE_IMAGE_SIZE`` and ``CONDITION_IMAGE_SIZE``."""
    from diffusers.pipelines.qwenimage import pipeline_qwenimage_edit as edit_module
    from diffusers.pipelines.qwenimage import pipeline_qwenimage_edit_plus as plus_module

    original = edit_module.calculate_dimensions
    saved = (plus_module.VAE_IMAGE_SIZE, plus_module.CONDITION_IMAGE_SIZE)
    edit_module.calculate_dimensions = lambda _area, ratio: original(vae_area, ratio)
    plus_module.VAE_IMAGE_SIZE, plus_module.CONDITION_IMAGE_SIZE = vae_area, vlm_area
    try:
        yield
    finally:
        edit_module.calculate_dimensions = original
        plus_module.VAE_IMAGE_SIZE, plus_module.CONDITION_IMAGE_SIZE = saved


def pipe_output(pipe: Any, prompt: str, sources: tuple[np.ndarray, ...], *, steps: int, cfg: float, seed: int) -> Any:
    """The pipeline's own ``__call__`` at the tests' condition areas: (packed final latents, uint8 (1, SIZE, SIZE,
    3) images); true CFG with the negative prompt " " (the model's default) when ``cfg > 1``."""
    import torch
    from PIL import Image

    images = [Image.fromarray(s) for s in sources]
    plus = type(pipe).__name__ == "QwenImageEditPlusPipeline"

    def run(output_type: str) -> Any:
        with pipeline_areas(), torch.no_grad():
            return pipe(
                image=images if plus else images[0],
                prompt=prompt,
                negative_prompt=" " if cfg > 1 else None,
                true_cfg_scale=cfg,
                height=SIZE,
                width=SIZE,
                num_inference_steps=steps,
                generator=torch.Generator().manual_seed(seed),
                output_type=output_type,
            ).images

    decoded = torch.from_numpy(run("np"))
    return run("latent"), (decoded * 255).round().to(torch.uint8)


def rollout(model: Any, sampler: Any, request: Any, *, cfg: float, steps: int, batch_size: int = 4) -> Any:
    """The ``diffusers`` rollout backend's batch for ``request`` at the tests' size."""
    from omni_rl import build

    options = {"group_size": 2, "steps": steps, "eval_steps": steps, "height": SIZE, "width": SIZE, "cfg": cfg}
    return build("rollout", "diffusers", {**options, "batch_size": batch_size}).generate(model, sampler, request)
