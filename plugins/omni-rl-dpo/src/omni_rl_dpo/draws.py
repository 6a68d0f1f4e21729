"""The (t, ε) draw of one DPO pair, from the chosen sample's generator (docs/math.md#diffusion-dpo-loss).

Diffusion-DPO noises the chosen and the rejected image with the same noise at the same timestep (the reference
``train.py`` draws them for the first half of the batch and repeats them for the second): the comparison of the
two denoising errors is then not swamped by the noise's own variance. Drawing from the chosen sample's
generator, which the update seeds from (run seed, step, epoch, sample id, draw index), makes the draw
independent of how the batch is cut into micro-batches and workers.
"""

from __future__ import annotations

import torch
from torch import Tensor


def logit_normal_t(generator: torch.Generator, *, mean: float, std: float) -> Tensor:
    """t = sigmoid(mean + std·z), z ~ N(0, 1): a float32 tensor of shape (1,), in (0, 1).

    SD3's training density ("logit-normal(0, 1)"), which weights the middle of the path where denoising is
    hardest.
    """
    z = torch.randn(1, generator=generator, dtype=torch.float32)
    return torch.sigmoid(mean + std * z)


def pair_draw(
    generator: torch.Generator, latent_shape: tuple[int, ...], *, mean: float, std: float
) -> tuple[Tensor, Tensor]:
    """(t of shape (1,), ε of ``latent_shape``), float32, in that order from ``generator``."""
    t = logit_normal_t(generator, mean=mean, std=std)
    noise = torch.randn(latent_shape, generator=generator, dtype=torch.float32)
    return t, noise
