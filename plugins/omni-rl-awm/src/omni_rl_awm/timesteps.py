"""AWM's per-sample draws of the training time t and the noise ε, from the update's per-sample
generators (docs/math.md#awm-loss).

Each sample draws, from its own generator and in this order, one uniform U ∈ [0, 1) (float64) and then
ε ~ N(0, I) (float32) shaped like its latent. Draw k of the ``count`` draws per update is stratified, so a
sample sees every stratum once per update (the reference stratifies the same way, over its
``train_timesteps``):

- ``uniform``: s = (k + U) / count, t = lo + s·(hi − lo) over ``time_range`` (the reference's 0.2 … 1.0),
  then shifted, t ← shift·t / (1 + (shift − 1)·t);
- ``logit_normal``: t = sigmoid(Φ⁻¹(s)) (location 0, scale 1, as the reference), shifted, floored at 0.01
  (the reference's clamp);
- ``discrete``: a step index of the model's sampling schedule of ``schedule_steps`` steps. As the reference's
  ``discrete`` / ``discrete_wo_init``: bounds = int(linspace(first, int(steps · fraction), count + 1)) in
  float32, first = 1 when skipping σ = 1; index = lower_k + int(U·(upper_k − lower_k)); t = σ[index]. The
  reference reads σ back as timestep / 1000; here σ is taken from the schedule directly.

The reference draws one t per stratum for the whole batch; here each sample draws its own, so the draws do not
depend on micro-batching or on the number of workers. Continuous t is computed in Python floats (double) and
handed out as float32.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import Any

import torch
from torch import Tensor

from omni_rl_awm.config import AWMLossConfig

#: the reference's floor of a logit-normal t (a t of 0 would train on the clean sample itself)
LOGIT_NORMAL_MIN_T = 0.01
_STANDARD_NORMAL = NormalDist()


def stratified_time(u: float, index: int, count: int, config: AWMLossConfig) -> float:
    """Continuous t ("uniform", "logit_normal") of draw ``index`` of ``count`` from a uniform ``u`` ∈ [0, 1)."""
    s = (index + u) / count
    if config.time_sampling == "uniform":
        lo, hi = config.time_range
        t = lo + s * (hi - lo)
    else:
        t = 0.0 if s <= 0.0 else 1.0 if s >= 1.0 else 1.0 / (1.0 + math.exp(-_STANDARD_NORMAL.inv_cdf(s)))
    shift = config.time_shift
    t = shift * t / (1.0 + (shift - 1.0) * t)
    if config.time_sampling == "logit_normal":
        t = max(t, LOGIT_NORMAL_MIN_T)
    return t


def schedule_index(u: float, index: int, count: int, config: AWMLossConfig) -> int:
    """The sampling-schedule step ("discrete") of draw ``index`` of ``count`` from a uniform ``u`` ∈ [0, 1)."""
    first = 1 if config.schedule_skip_first else 0
    last = int(config.schedule_steps * config.schedule_fraction)
    bounds = torch.linspace(first, last, count + 1, dtype=torch.float32).long().tolist()
    lower, upper = bounds[index], bounds[index + 1]
    return lower + int(u * (upper - lower))


def _schedule(sigma_schedule: Any, config: AWMLossConfig) -> Tensor:
    if sigma_schedule is None:
        raise ValueError(
            'awm: time_sampling = "discrete" needs the model\'s sigma schedule, but the update engine passed '
            "none (ForwardLossInputs.sigma_schedule)"
        )
    sigmas = torch.as_tensor(sigma_schedule(config.schedule_steps), dtype=torch.float32).cpu()
    if sigmas.shape != (config.schedule_steps + 1,):
        raise ValueError(
            f"awm: the sigma schedule of {config.schedule_steps} steps has shape {tuple(sigmas.shape)}, "
            f"expected ({config.schedule_steps + 1},)"
        )
    return sigmas


def draw_time_and_noise(
    generators: Sequence[Any],
    latent_shape: Sequence[int],
    *,
    index: int,
    count: int,
    config: AWMLossConfig,
    device: Any = "cpu",
    sigma_schedule: Any = None,
) -> tuple[Tensor, Tensor]:
    """(t of shape (B,), ε of shape (B, *latent_shape)), float32 on ``device``, one sample per generator.

    ``sigma_schedule(num_steps)`` (the model's sampling sigmas) is needed only for ``time_sampling = "discrete"``.
    """
    if not 0 <= index < count:
        raise ValueError(f"awm: timestep draw {index} is outside the {count} draws of an update")
    sigmas = _schedule(sigma_schedule, config) if config.time_sampling == "discrete" else None
    times, noises = [], []
    for generator in generators:
        u = float(torch.rand((), generator=generator, dtype=torch.float64))
        if sigmas is None:
            times.append(stratified_time(u, index, count, config))
        else:
            times.append(float(sigmas[schedule_index(u, index, count, config)]))
        noises.append(torch.randn(tuple(latent_shape), generator=generator, dtype=torch.float32))
    t = torch.tensor(times, dtype=torch.float32, device=device)
    return t, torch.stack(noises).to(device)
