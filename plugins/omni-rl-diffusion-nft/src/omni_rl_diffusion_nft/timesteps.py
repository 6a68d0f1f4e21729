"""Which timesteps DiffusionNFT trains on, and the noise that re-noises x₀ there (docs/math.md#diffusionnft-loss).

The reference (NVlabs/DiffusionNFT, ``scripts/train_nft_sd3.py``) trains each sample on the timesteps of its
own sampling schedule: the scheduler's ``num_steps`` sigmas (shift applied, the final 0 left out), shuffled per
sample and per inner epoch, of which the first ``int(num_steps × timestep_fraction)`` are used. So t is uniform
over the schedule's sigmas (σ = 1 included), and one sample never sees the same t twice in an epoch.

Here the permutation comes from the sample's epoch generator (the same state at every timestep index of an
epoch), and draw k takes its k-th entry: the same draws as the reference's, independent of micro-batching and
of the number of workers. Noise comes from the per-(sample, k) generator, a fresh ε for every draw as there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from omni_rl.errors import RuntimeFailure


def schedule_timesteps(sigmas: Tensor, num_steps: int) -> Tensor:
    """The ``num_steps`` training timesteps of a schedule of ``num_steps + 1`` sigmas (the final 0 dropped)."""
    sigmas = torch.as_tensor(sigmas, dtype=torch.float32).reshape(-1)
    if sigmas.numel() != num_steps + 1:
        raise RuntimeFailure(
            f"diffusion_nft asked for a {num_steps}-step sigma schedule and got {sigmas.numel()} sigmas",
            hint="the model's sigma_schedule(num_steps, height, width) must return num_steps + 1 sigmas",
        )
    if not bool((sigmas[1:] < sigmas[:-1]).all()) or not 0.0 <= float(sigmas[-1]) < float(sigmas[0]) <= 1.0:
        raise RuntimeFailure(
            f"diffusion_nft needs a strictly decreasing sigma schedule in [0, 1], got {sigmas.tolist()}",
            hint="check the model plugin's sigma_schedule",
        )
    return sigmas[:-1].clone()


def timestep_indices(
    epoch_generators: Sequence[Any], generators: Sequence[Any], num_steps: int, timestep_index: int
) -> Tensor:
    """Per sample, which of the ``num_steps`` schedule timesteps draw ``timestep_index`` trains (long, (B,)).

    With epoch generators: entry ``timestep_index`` of one random permutation per sample and epoch (draws
    without replacement, as the reference). Without them (a caller that does not provide them), one uniform
    draw from the per-draw generator, with replacement.
    """
    if epoch_generators:
        if timestep_index >= num_steps:
            raise RuntimeFailure(
                f"diffusion_nft: timestep draw {timestep_index} of a {num_steps}-step schedule",
                hint="train at most num_steps timesteps per sample (loss options timesteps / timestep_fraction)",
            )
        picks = [int(torch.randperm(num_steps, generator=g)[timestep_index]) for g in epoch_generators]
    else:
        picks = [int(torch.randint(num_steps, (1,), generator=g)) for g in generators]
    return torch.as_tensor(picks, dtype=torch.long)


def draw_noise(generators: Sequence[Any], shape: Sequence[int]) -> Tensor:
    """ε ~ N(0, I) of ``shape`` per sample, each from its own generator, float32 (B, *shape) on the CPU."""
    return torch.stack([torch.randn(tuple(shape), generator=g, dtype=torch.float32) for g in generators])
