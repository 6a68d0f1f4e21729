"""Val reward of a shapes pipeline on the val prompts: an SD3 pipeline sampled by ``StableDiffusion3Pipeline``
itself (:func:`val_reward`), or an omni-rl model (the Qwen-Image one) sampled through omni-rl's model protocol,
the path RL runs take (:func:`model_val_reward`).

Pretraining stops on this number and the shipped model's test re-measures it, so both use one function and
one record of the sampling settings (:class:`SamplingSettings`, saved next to the weights). Each image has its
own seeded generator, so a sample does not depend on which other prompts share its batch.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from omni_rl_shapes.reward import ShapesReward

#: file in the pipeline directory holding how it was pretrained and how its val reward was measured
RECORD_FILE = "omni_rl_shapes_pretrain.json"


@attrs.frozen(kw_only=True)
class SamplingSettings:
    """How val images are sampled: the pipeline's ODE (Euler, shifted sigmas) with CFG."""

    num_inference_steps: int = 10
    guidance_scale: float = 4.5
    size: int = 32
    #: T5 tokens per prompt; the model was pretrained with this many, use the same in [model] options
    max_sequence_length: int = 32
    #: images per val prompt; image j of prompt i uses seed ``seed_offset + i + j * len(prompts)``
    images_per_prompt: int = 2
    seed_offset: int = 0
    batch_size: int = 48
    #: frames per sample: 1 for the image models, 4k + 1 for the Wan motion model (clips (N, F, H, W, 3))
    num_frames: int = 1


def _jobs(prompts: Sequence[str], settings: SamplingSettings) -> list[tuple[str, int]]:
    """(prompt, seed) of every val image: image j of prompt i has seed ``seed_offset + i + j * len(prompts)``."""
    return [
        (prompt, settings.seed_offset + i + j * len(prompts))
        for j in range(settings.images_per_prompt)
        for i, prompt in enumerate(prompts)
    ]


def sample(pipe: Any, prompts: Sequence[str], settings: SamplingSettings) -> tuple[list[str], np.ndarray]:
    """(prompt per image, uint8 images (N, H, W, 3)) sampled with ``StableDiffusion3Pipeline.__call__``."""
    import torch

    jobs = _jobs(prompts, settings)
    images = []
    for start in range(0, len(jobs), settings.batch_size):
        chunk = jobs[start : start + settings.batch_size]
        with torch.no_grad():
            out = pipe(
                prompt=[p for p, _ in chunk],
                num_inference_steps=settings.num_inference_steps,
                guidance_scale=settings.guidance_scale,
                height=settings.size,
                width=settings.size,
                max_sequence_length=settings.max_sequence_length,
                generator=[torch.Generator().manual_seed(s) for _, s in chunk],
                output_type="np",
            ).images
        images.append(np.clip(np.rint(out * 255), 0, 255).astype(np.uint8))
    return [p for p, _ in jobs], np.concatenate(images)


def val_reward(
    pipe: Any,
    prompts: Sequence[str],
    settings: SamplingSettings,
    reward: ShapesReward | None = None,
    grid_path: str | Path | None = None,
) -> dict[str, float]:
    """Mean reward and sub-scores (``score``, ``strict``, ``color``, ...) of the pipeline on ``prompts``;
    with ``grid_path``, also a PNG of the sampled images (one row per image of each prompt)."""
    return score(*sample(pipe, prompts, settings), columns=len(prompts), reward=reward, grid_path=grid_path)


def sample_model(model: Any, prompts: Sequence[str], settings: SamplingSettings) -> tuple[list[str], np.ndarray]:
    """(prompt per image, uint8 images, or clips (N, F, H, W, 3) with ``num_frames > 1``) sampled from an omni-rl
    ``DiffusionModel`` by the Euler ODE over its own ``sigma_schedule`` with its ``predict_velocity`` (CFG as the
    model does it: true CFG with the negative prompt for Qwen-Image and Wan). Seeds as :func:`sample`; each
    image's initial noise comes from its own generator, drawn in the (C, h, w) (video: (C, F', h, w)) layout the
    pipelines draw it in, so a sample does not depend on its batch."""
    import torch

    jobs = _jobs(prompts, settings)
    size, guidance = settings.size, settings.guidance_scale
    sigmas = model.sigma_schedule(settings.num_inference_steps, size, size).float().cpu()
    shape = (
        model.latent_shape(size, size)
        if settings.num_frames == 1
        else model.latent_shape(size, size, settings.num_frames)
    )
    images = []
    for start in range(0, len(jobs), settings.batch_size):
        chunk = jobs[start : start + settings.batch_size]
        with torch.no_grad():
            conditioning = model.encode_prompts([p for p, _ in chunk], guidance_scale=guidance)
            x = torch.stack([torch.randn(shape, generator=torch.Generator().manual_seed(s)) for _, s in chunk])
            for i in range(settings.num_inference_steps):
                velocity = model.predict_velocity(x, sigmas[i].expand(len(chunk)), conditioning, guidance)
                x = x + velocity.float().cpu() * (sigmas[i + 1] - sigmas[i])
            images.append(model.decode(x).cpu().numpy())
    return [p for p, _ in jobs], np.concatenate(images)


def model_val_reward(
    model: Any,
    prompts: Sequence[str],
    settings: SamplingSettings,
    reward: ShapesReward | None = None,
    grid_path: str | Path | None = None,
) -> dict[str, float]:
    """:func:`val_reward` of an omni-rl model, sampled by :func:`sample_model`."""
    return score(*sample_model(model, prompts, settings), columns=len(prompts), reward=reward, grid_path=grid_path)


def score(
    image_prompts: Sequence[str],
    images: np.ndarray,
    *,
    columns: int,
    reward: ShapesReward | None = None,
    grid_path: str | Path | None = None,
) -> dict[str, float]:
    """Mean verifier reward and sub-scores of sampled images; with ``grid_path`` also their PNG grid."""
    reward = reward or ShapesReward()
    result = reward(images, list(image_prompts), [{}] * len(image_prompts))
    if grid_path is not None:
        save_grid(images, columns=columns, path=grid_path)
    return {"score": float(result.scores.mean())} | {k: float(v.mean()) for k, v in result.details.items()}


def save_grid(images: np.ndarray, columns: int, path: str | Path, gap: int = 2) -> None:
    """Tile uint8 (N, H, W, 3) images into one PNG, ``columns`` per row, on a gray grid."""
    from PIL import Image

    n, h, w, _ = images.shape
    rows = -(-n // columns)
    canvas = np.full((rows * (h + gap) + gap, columns * (w + gap) + gap, 3), 128, dtype=np.uint8)
    for k, image in enumerate(images):
        r, c = divmod(k, columns)
        canvas[gap + r * (h + gap) : gap + r * (h + gap) + h, gap + c * (w + gap) : gap + c * (w + gap) + w] = image
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(canvas).save(path)


def read_record(pipeline_dir: str | Path) -> dict[str, Any]:
    """The pretraining record saved with a shapes pipeline (see :mod:`omni_rl_shapes.pretraining.pretrain`)."""
    return json.loads((Path(pipeline_dir) / RECORD_FILE).read_text(encoding="utf-8"))


def settings_from_record(record: dict[str, Any]) -> SamplingSettings:
    return SamplingSettings(**record["sampling"])
