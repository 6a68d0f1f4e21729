"""Deterministic solvers for the rollout steps outside the SDE window (docs/math.md#dpm-solver2m).

``euler`` is the step of diffusers' FlowMatchEulerDiscreteScheduler, x' = x + v·(σ' − σ), written exactly as the
rollout backend always wrote it, so choosing it changes no bit of a rollout.

``dpm_solver_2m`` is MixGRPO-Flash's solver (Li et al., "MixGRPO", 2025; Tencent-Hunyuan/MixGRPO samples the
steps after its window with DPM-Solver++ of order 2): DPM-Solver++(2M) (Lu et al., 2022) in the flow
parametrisation, α = 1 − σ, λ = log(α/σ), data prediction D = x − σ·v. From σ to σ', with h = λ' − λ:

    x' = (σ'/σ)·x − α'·(e^(−h) − 1)·D̃,   D̃ = D (first order) or (1 + 1/(2r))·D − (1/(2r))·D_prev, r = h_prev/h

e^(−h) is computed as the ratio α·σ' / (σ·α'), which is finite at both ends of the schedule: at σ = 1 (λ = −∞)
it is 0 and the step is x' = σ'·x + (1 − σ')·D; at σ' = 0 it is 0 too and the step returns D. A previous step
that started at σ = 1 has h_prev = ∞, so the step after it has 1/(2r) = 0 and is first order, as diffusers'
DPMSolverMultistepScheduler is when its schedule starts at σ = 1. First-order DPM-Solver++ is the Euler step
in exact arithmetic (x' = x + (σ' − σ)·v): the two differ only by float rounding.

Where this differs from the reference implementation: MixGRPO keeps feeding its multistep state during the
window, so its first ODE step after the window is second order on the last stochastic step's D; here
``reset()`` after each stochastic step makes it first order (docs/math.md#dpm-solver2m), since a noisy step breaks
the smooth trajectory the second-order extrapolation assumes. Its "lower order for the last two steps below 15 steps"
rule (diffusers' ``lower_order_final``) is not applied: only the step to σ' = 0 is first order.
"""

from __future__ import annotations

from typing import Protocol

import torch
from torch import Tensor

from omni_rl_flow_grpo.samplers._tensors import as_f32, per_sample


class DeterministicSolver(Protocol):
    """What the rollout backend calls for a step outside the window (one solver per batch chunk)."""

    def step(self, x: Tensor, velocity: Tensor, sigma: Tensor, sigma_next: Tensor) -> Tensor:
        """x' from x and the model's velocity at σ; ``sigma``/``sigma_next`` per sample, shape (B,)."""

    def reset(self) -> None:
        """Forget the previous steps: the next step is first order (at the start, after a stochastic step)."""


class EulerSolver:
    """x' = x + v·(σ' − σ): the Euler step of diffusers' FlowMatchEulerDiscreteScheduler. Keeps no state."""

    def step(self, x: Tensor, velocity: Tensor, sigma: Tensor, sigma_next: Tensor) -> Tensor:
        x, velocity = as_f32(x), as_f32(velocity)
        return x + velocity * (as_f32(sigma_next) - as_f32(sigma)).view(-1, *([1] * (x.ndim - 1)))

    def reset(self) -> None:
        """Nothing to forget."""


class DPMSolver2M:
    """DPM-Solver++(2M) in the flow parametrisation (see the module docstring), float32, per-sample sigmas.

    It keeps the previous step's data prediction D and log-SNR step h for the second-order update, so one
    instance serves one batch chunk's trajectory from σ = 1 to 0.
    """

    def __init__(self) -> None:
        self._prev_data: Tensor | None = None
        self._prev_h: Tensor | None = None

    def reset(self) -> None:
        self._prev_data = None
        self._prev_h = None

    def step(self, x: Tensor, velocity: Tensor, sigma: Tensor, sigma_next: Tensor) -> Tensor:
        x, velocity = as_f32(x), as_f32(velocity)
        sig, sig_next = per_sample(sigma, x), per_sample(sigma_next, x)
        alpha, alpha_next = 1 - sig, 1 - sig_next
        data = x - sig * velocity
        # e^(-h) = (α σ') / (σ α'): 0 at σ = 1 and at σ' = 0, where h = +∞ and the step is first order
        decay = (alpha * sig_next) / (sig * alpha_next)
        h = -torch.log(decay)
        data_used = data
        if self._prev_data is not None and self._prev_h is not None:
            if self._prev_data.shape != data.shape:
                raise ValueError(
                    f"dpm_solver_2m: this step's latents have shape {tuple(data.shape)} but the previous step's had "
                    f"{tuple(self._prev_data.shape)}; use one solver per batch chunk, or call reset() between them"
                )
            # 1/(2r) = h / (2 h_prev); 0 where the previous step started at σ = 1 (h_prev = ∞); unused where
            # σ' = 0 (h = ∞), which is first order below
            finite = torch.isfinite(h)
            half_inv_r = torch.where(finite, h / (2 * self._prev_h), torch.zeros_like(h))
            data_used = (1 + half_inv_r) * data - half_inv_r * self._prev_data
        out = (sig_next / sig) * x - alpha_next * (decay - 1) * data_used
        out = torch.where(sig_next == 0, data, out)  # the last step is first order and lands on D
        self._prev_data, self._prev_h = data, h
        return out


SOLVERS: dict[str, type] = {"euler": EulerSolver, "dpm_solver_2m": DPMSolver2M}


def build_solver(name: str) -> DeterministicSolver:
    """A fresh solver by its ``ode_solver`` option name ("euler" or "dpm_solver_2m")."""
    try:
        return SOLVERS[name]()
    except KeyError:
        raise ValueError(f"unknown ode_solver {name!r}; expected one of {sorted(SOLVERS)}") from None
