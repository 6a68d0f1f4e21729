"""Toys for the awm tests: a linear "model" whose policy views have known weights, and a fake adapter store."""

from __future__ import annotations

from typing import Any

import torch

from omni_rl.batch import ForwardLossInputs


class LinearViews:
    """``velocity(view, x_t, t) = θ_view · x_t`` with one scalar weight per view: gradients are easy by hand.

    ``theta`` (the current policy) is a leaf requiring grad; the other views are plain floats (no grad), as
    the update engine evaluates them under ``no_grad``. Every call is recorded as (view, x_t, t).
    """

    def __init__(self, theta: float, **views: float) -> None:
        self.theta = torch.tensor(theta, requires_grad=True)
        self.views = {"old": theta, **views}
        self.calls: list[tuple[str, torch.Tensor, torch.Tensor]] = []

    def __call__(self, view: str, x_t: torch.Tensor, t: torch.Tensor, samples: Any = None) -> torch.Tensor:
        self.calls.append((view, x_t.detach().clone(), t.detach().clone()))
        if view == "current":
            return self.theta * x_t
        return self.views[view] * x_t.detach()

    def views_called(self) -> list[str]:
        return [view for view, _, _ in self.calls]


def linear_schedule(num_steps: int) -> torch.Tensor:
    """A sigma schedule without shift: 1, (n - 1)/n, …, 0."""
    return torch.linspace(1.0, 0.0, num_steps + 1)


def forward_inputs(
    velocity: Any,
    x0: torch.Tensor,
    advantages: torch.Tensor,
    *,
    timestep_index: int = 0,
    seed: int = 0,
    sigma_schedule: Any = linear_schedule,
) -> ForwardLossInputs:
    n = x0.shape[0]
    return ForwardLossInputs(
        x0=x0,
        advantages=advantages,
        rewards=torch.zeros(n),
        group_ids=torch.arange(n) // 2,
        generators=[torch.Generator().manual_seed(seed + i) for i in range(n)],
        velocity=velocity,
        timestep_index=timestep_index,
        sigma_schedule=sigma_schedule,
    )


class FakeAdapters:
    """A model with named adapters holding one float each: ``blend_adapter`` does the documented update."""

    def __init__(self, trained: float = 1.0) -> None:
        self.weights = {"default": trained}
        self.log: list[tuple[Any, ...]] = []

    def add_adapter(self, name: str, *, copy_from: str | None = "default") -> None:
        self.log.append(("add", name, copy_from))
        self.weights[name] = self.weights[copy_from] if copy_from is not None else 0.0

    def blend_adapter(self, target: str, source: str = "default", *, decay: float) -> None:
        self.log.append(("blend", target, source, decay))
        self.weights[target] = decay * self.weights[target] + (1 - decay) * self.weights[source]

    def use_adapter(self, name: str) -> Any:  # pragma: no cover - present for the capability check
        raise NotImplementedError
