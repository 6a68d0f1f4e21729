"""AdamW and the learning-rate schedule of the policy workers."""

from __future__ import annotations

import math
from typing import Any

import torch

from omni_rl.config.schema import OptimConfig


def build_optimizer(params: list[torch.nn.Parameter], optim: OptimConfig) -> torch.optim.Optimizer:
    return torch.optim.AdamW(
        params, lr=optim.lr, betas=tuple(optim.betas), eps=optim.eps, weight_decay=optim.weight_decay
    )


def build_scheduler(optimizer: torch.optim.Optimizer, optim: OptimConfig, total_steps: int) -> Any:
    """Linear warmup, then constant, linear decay to 0, or cosine decay to 0 over the run's steps."""

    def factor(step: int) -> float:
        if optim.warmup_steps and step < optim.warmup_steps:
            return (step + 1) / optim.warmup_steps
        if optim.lr_schedule == "constant":
            return 1.0
        span = max(1, total_steps - optim.warmup_steps)
        progress = min(1.0, (step - optim.warmup_steps) / span)
        if optim.lr_schedule == "linear":
            return 1.0 - progress
        return 0.5 * (1.0 + math.cos(math.pi * progress))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
