"""Fixtures and helpers of the image-to-video tests: the three tiny layouts, the models as a run builds them, first
frames, and ``WanImageToVideoPipeline.__call__``'s own frames (the ground truth)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
import wan_helpers  # noqa: F401 - sets the offline environment before diffusers is imported

FRAMES = 5
STEPS = 4
PROMPTS = ["a red ball rolls to the right", "two dots drift apart"]


@attrs.frozen
class Layout:
    """One tiny layout: the model name that loads it and the frame size its VAE and patches take."""

    key: str
    model: str
    size: int


#: Wan2.1 I2V (CLIP image tokens), Wan2.2 I2V-A14B (two experts), Wan2.2 TI2V-5B (48-channel VAE, 16x spatial)
LAYOUTS = {
    "wan21_i2v": Layout("wan21_i2v", "wan_i2v", 32),
    "wan22_i2v": Layout("wan22_i2v", "wan_i2v", 32),
    "wan22_ti2v": Layout("wan22_ti2v", "wan_ti2v", 64),
}


@pytest.fixture(scope="session")
def tiny_i2v_paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each layout's tiny pipeline, built once per session."""
    from omni_rl_wan.i2v_tiny import build_tiny_wan_i2v_pipeline, build_tiny_wan_ti2v_pipeline

    root = tmp_path_factory.mktemp("wan-i2v")
    return {
        "wan21_i2v": build_tiny_wan_i2v_pipeline(root / "wan21-i2v", seed=0),
        "wan22_i2v": build_tiny_wan_i2v_pipeline(root / "wan22-i2v", seed=0, two_experts=True),
        "wan22_ti2v": build_tiny_wan_ti2v_pipeline(root / "wan22-ti2v", seed=0),
    }


def build_i2v_model(path: Path, name: str, **options: Any) -> Any:
    """The ``name`` model as a run builds it (the plugin's factory and option structuring), float32, CPU."""
    from omni_rl_wan import hooks

    from omni_rl.config import structure_options
    from omni_rl.context import BuildContext

    (spec,) = [s for s in hooks.omni_rl_models() if s.name == name]
    merged = {"path": str(path), "lora_rank": 4, **options}
    return spec.factory(structure_options(spec, merged), BuildContext(device="cpu"))


def first_frame(seed: int, height: int = 40, width: int = 48) -> np.ndarray:
    """A first frame as the prompt source loads it: uint8 (H, W, 3), smooth enough that resizing keeps it."""
    rng = np.random.default_rng(seed)
    coarse = rng.integers(0, 256, (height // 8 + 1, width // 8 + 1, 3), dtype=np.uint8)
    return np.ascontiguousarray(np.kron(coarse, np.ones((8, 8, 1), dtype=np.uint8))[:height, :width])


class _NoFtfy:
    """Stands in for the ftfy module: ``fix_text`` as it behaves on ASCII prompts (it returns them unchanged)."""

    @staticmethod
    def fix_text(text: str) -> str:
        return text


def load_i2v_pipe(path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The pipeline loaded by diffusers alone. ``WanImageToVideoPipeline`` cleans prompts with ``ftfy.fix_text``
    but imports ftfy only when it is installed (it is not here); the test prompts are ASCII, which fix_text leaves
    as they are, so a stand-in with that behaviour lets ``__call__`` run unchanged otherwise."""
    import diffusers.pipelines.wan.pipeline_wan_i2v as module
    from diffusers import WanImageToVideoPipeline

    if not hasattr(module, "ftfy"):
        monkeypatch.setattr(module, "ftfy", _NoFtfy, raising=False)
    pipe = WanImageToVideoPipeline.from_pretrained(path)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def pipeline_frames(
    pipe: Any, image: np.ndarray, prompt: str, noise: Any, *, size: int, guidance: float, **kwargs: Any
) -> np.ndarray:
    """``WanImageToVideoPipeline.__call__``'s frames (float in [0, 1], (1, F, H, W, 3)) for this first frame (as a
    PIL image, what the pipeline takes) from the same initial latents."""
    from PIL import Image

    return pipe(
        image=Image.fromarray(image),
        prompt=prompt,
        height=size,
        width=size,
        num_frames=FRAMES,
        num_inference_steps=STEPS,
        guidance_scale=guidance,
        latents=noise.clone(),
        **{"output_type": "np", **kwargs},
    ).frames


def initial_noise(model: Any, size: int, seed: int) -> Any:
    import torch

    shape = model.latent_shape(size, size, num_frames=FRAMES)
    return torch.randn((1, *shape), generator=torch.Generator().manual_seed(seed))


def euler_video(
    model: Any, prompt: str, image: np.ndarray | None, *, size: int, guidance: float, seed: int
) -> tuple[Any, Any, Any]:
    """x <- x + v (sigma' - sigma) over the model's schedule from seeded noise, conditioned through
    ``encode_conditions`` (no first frame when ``image`` is None): (initial noise, final latents, uint8 frames)."""
    import torch

    noise = initial_noise(model, size, seed)
    x = noise.clone()
    sigmas = model.sigma_schedule(STEPS, size, size)
    images = [[] if image is None else [image]]
    conditioning = model.encode_conditions([prompt], images, guidance_scale=guidance)
    with torch.no_grad():
        for i in range(STEPS):
            velocity = model.predict_velocity(x, sigmas[i].expand(1), conditioning, guidance)
            x = x + velocity * (sigmas[i + 1] - sigmas[i])
        return noise, x, model.decode(x)


def frame_error(frames: Any, reference: np.ndarray) -> float:
    """The largest difference of uint8 frames from the pipeline's float frames, in levels of 1/255."""
    return float(np.abs(frames.numpy().astype(np.float64) - reference * 255).max())
