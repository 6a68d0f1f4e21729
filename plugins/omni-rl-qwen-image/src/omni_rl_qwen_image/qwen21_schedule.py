"""QwenImage21Pipeline's sigma grid.

The pipeline steps through ``sigmas`` (a call argument), else the checkpoint's ``sample_sigmas`` (in the pipeline's
config: the grid the model's authors publish, its length the step count), else linspace(1, 1/n, n); the scheduler
then applies its configured processing with mu = calculate_shift(h x w latent tokens) and appends the terminal
sigma. omni-rl's step count is the rollout's: the published grid is used when it has that many steps, and the
linspace grid otherwise (what the pipeline gives for ``sigmas=np.linspace(1, 1/n, n)``), so Flow-GRPO may train with
fewer steps than the checkpoint samples with.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch


def qwen_image21_sigmas(
    scheduler: Any, num_steps: int, latent_height: int, latent_width: int, *, sample_sigmas: Sequence[float] | None
) -> torch.Tensor:
    """The n + 1 sigmas (the terminal one included) the pipeline steps through, float32 on the CPU."""
    import numpy as np
    from diffusers.pipelines.qwenimage21.pipeline_qwenimage21 import calculate_shift

    scheduler = type(scheduler).from_config(scheduler.config)  # a private copy: set_timesteps mutates state
    config = scheduler.config
    mu = calculate_shift(
        latent_height * latent_width,
        config.get("base_image_seq_len", 256),
        config.get("max_image_seq_len", 4096),
        config.get("base_shift", 0.5),
        config.get("max_shift", 1.15),
    )
    grid = list(sample_sigmas) if sample_sigmas is not None and len(sample_sigmas) == num_steps else None
    if grid is None:
        grid = np.linspace(1.0, 1 / num_steps, num_steps)
    scheduler.set_timesteps(sigmas=grid, device="cpu", mu=mu)
    return scheduler.sigmas.to(dtype=torch.float32)
