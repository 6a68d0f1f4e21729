"""Wan's sampling sigmas, read from the pipeline's own scheduler.

Wan ships two schedulers: ``FlowMatchEulerDiscreteScheduler`` with a fixed ``shift`` (the diffusers docs' Euler
setup, and the tiny pipeline's), and the hub repositories' ``UniPCMultistepScheduler`` with ``use_flow_sigmas`` and
``flow_shift`` (3.0 at 480p, 5.0 at 720p). Either way the sigmas are the scheduler's own after ``set_timesteps``
(a fresh instance, so the pipeline's step counter is untouched): the flow-matching schedule with Wan's shift
``s·σ / (1 + (s - 1)·σ)``. The rollout steps it with Euler (ODE) or an SDE sampler; with FlowMatchEuler that is
exactly ``WanPipeline.__call__``, with UniPC the same sigmas under a first-order solver.
"""

from __future__ import annotations

from typing import Any

import torch

from omni_rl.errors import ConfigError


def wan_sigmas(scheduler: Any, num_steps: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """num_steps + 1 float32 sigmas from 1 (or the shifted first sigma) down to 0."""
    if num_steps < 1:
        raise ConfigError(f"num_steps must be >= 1, got {num_steps}", hint="set [rollout] steps >= 1")
    name = type(scheduler).__name__
    config = scheduler.config
    if name == "UniPCMultistepScheduler" and not config.get("use_flow_sigmas", False):
        raise ConfigError(
            "this Wan pipeline's UniPCMultistepScheduler does not use flow sigmas (use_flow_sigmas = false)",
            hint="Wan samples flow-matching sigmas: set use_flow_sigmas = true and flow_shift in scheduler_config.json",
        )
    if name not in ("UniPCMultistepScheduler", "FlowMatchEulerDiscreteScheduler"):
        raise ConfigError(
            f"the wan model reads its sigmas from a FlowMatchEulerDiscreteScheduler or a flow-sigma "
            f"UniPCMultistepScheduler, not a {name}",
            hint="use the scheduler the Wan repositories ship, or FlowMatchEulerDiscreteScheduler(shift=...)",
        )
    if config.get("use_dynamic_shifting", False):
        raise ConfigError(
            "this Wan pipeline's scheduler uses a resolution-dependent shift (use_dynamic_shifting = true)",
            hint="WanPipeline passes no mu: use a fixed shift, as the Wan repositories do",
        )
    fresh = type(scheduler).from_config(config)
    fresh.set_timesteps(num_steps, device="cpu")
    sigmas = torch.as_tensor(fresh.sigmas, dtype=torch.float32)
    if sigmas.shape != (num_steps + 1,) or float(sigmas[-1]) != 0.0:
        raise ConfigError(
            f"the {name} gives {tuple(sigmas.shape)} sigmas ending at {float(sigmas[-1]):g} for {num_steps} steps",
            hint="the schedule must end at sigma 0 (final_sigmas_type = 'zero' for UniPC)",
        )
    return sigmas.to(device)
