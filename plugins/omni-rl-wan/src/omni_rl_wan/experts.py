"""Wan2.2 A14B's two experts as one module, and the rule that picks the expert of each step.

The core trains, checkpoints and ships weights of ``model.transformer`` (the trainable and frozen-adapter tensors by
parameter name), so a two-expert model exposes both experts under one ``torch.nn.Module`` whose children are named
as the pipeline's components, ``transformer`` (high noise) and ``transformer_2`` (low noise). Nothing calls the
container's forward: each step runs the expert :func:`route` picks.
"""

from __future__ import annotations

import torch

HIGH_NOISE, LOW_NOISE = "transformer", "transformer_2"


class WanExperts(torch.nn.Module):
    """The high-noise ``transformer`` and the low-noise ``transformer_2`` of a two-expert Wan pipeline."""

    def __init__(self, transformer: torch.nn.Module, transformer_2: torch.nn.Module) -> None:
        super().__init__()
        self.transformer = transformer
        self.transformer_2 = transformer_2

    def expert(self, component: str) -> torch.nn.Module:
        return self.transformer if component == HIGH_NOISE else self.transformer_2


def route(timesteps: torch.Tensor, boundary_timestep: float | None) -> dict[str, torch.Tensor | None]:
    """The samples each expert denoises at these (B,) timesteps: WanPipeline's rule, ``t >= boundary`` goes to the
    high-noise expert and the rest to the low-noise one (everything to the high-noise one without a boundary).

    A batch may mix schedule steps (the update re-scores any stored step, DanceGRPO trains a subset per sample), so
    the rule is per sample. ``None`` stands for every sample (no indexing when one expert takes the whole batch)."""
    if boundary_timestep is None:
        return {HIGH_NOISE: None}
    high = timesteps >= boundary_timestep
    if bool(high.all()):
        return {HIGH_NOISE: None}
    if not bool(high.any()):
        return {LOW_NOISE: None}
    return {HIGH_NOISE: high.nonzero().flatten(), LOW_NOISE: (~high).nonzero().flatten()}
