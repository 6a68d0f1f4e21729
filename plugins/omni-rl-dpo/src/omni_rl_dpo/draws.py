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


def stratified_logit_normal_t(
    generator: torch.Generator, *, mean: float, std: float, stratum: int, strata: int
) -> Tensor:
    """t = sigmoid(mean + std·Φ⁻¹(u)) with u ~ U[stratum / strata, (stratum + 1) / strata): one draw from stratum
    ``stratum`` of ``strata`` equal-probability slices of the logit-normal density, shape (1,).

    u is kept off 0 and 1 by float32's resolution so Φ⁻¹ stays finite."""
    r = torch.rand(1, generator=generator, dtype=torch.float32)
    u = ((stratum + r) / strata).clamp(1e-6, 1 - 1e-6)
    z = torch.special.ndtri(u)
    return torch.sigmoid(mean + std * z)


def draw(
    generator: torch.Generator,
    latent_shape: tuple[int, ...],
    *,
    mean: float,
    std: float,
    time_range: tuple[float, float] = (0.0, 1.0),
    stratum: int | None = None,
    strata: int = 1,
) -> tuple[Tensor, Tensor]:
    """One (t, ε) of a DPO-family loss (docs/math.md#dpo-draws), in that order from ``generator``.

    u comes from the logit-normal density (from its stratum ``stratum`` of ``strata`` when given), and
    t = lo + (hi - lo)·u maps it into ``time_range``. With the defaults this is exactly :func:`pair_draw`.
    """
    if stratum is None:
        u = logit_normal_t(generator, mean=mean, std=std)
    else:
        u = stratified_logit_normal_t(generator, mean=mean, std=std, stratum=stratum, strata=strata)
    lo, hi = time_range
    t = u if (lo, hi) == (0.0, 1.0) else lo + (hi - lo) * u
    noise = torch.randn(latent_shape, generator=generator, dtype=torch.float32)
    return t, noise


def draws(
    generator: torch.Generator,
    latent_shape: tuple[int, ...],
    *,
    count: int,
    timestep_index: int,
    timesteps: int,
    mean: float,
    std: float,
    time_range: tuple[float, float],
    stratified: bool,
) -> tuple[Tensor, Tensor]:
    """``count`` draws of one pair (or group) at call ``timestep_index`` of ``timesteps``: (t of shape (count,),
    ε of shape (count, *latent_shape)). Stratified, draw d of this call takes stratum timestep_index·count + d of
    timesteps·count."""
    ts, noises = [], []
    for d in range(count):
        stratum = timestep_index * count + d if stratified else None
        t, noise = draw(
            generator,
            latent_shape,
            mean=mean,
            std=std,
            time_range=time_range,
            stratum=stratum,
            strata=timesteps * count,
        )
        ts.append(t)
        noises.append(noise)
    return torch.cat(ts), torch.stack(noises)
