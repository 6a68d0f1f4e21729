"""``ode``: the deterministic Euler step x' = x + v·dt (docs/math.md#ode-step).

Used for validation and, inside a rollout, for the steps outside the SDE window. It has no log-prob and no
window: nothing it produces is trained.
"""

from __future__ import annotations

import torch
from torch import Tensor

from omni_rl.batch import SamplerStep
from omni_rl_flow_grpo.config import ODEConfig
from omni_rl_flow_grpo.samplers._tensors import as_f32, next_sample, per_sample


class ODESampler:
    """The Euler sampler of diffusers' FlowMatchEulerDiscreteScheduler, in float32."""

    stochastic: bool = False

    def __init__(self, config: ODEConfig | None = None) -> None:
        self.config = config if config is not None else ODEConfig()

    def window(self, step: int, num_steps: int, seed: int) -> range:
        """No step is stochastic."""
        return range(0)

    def step(
        self,
        x: Tensor,
        velocity: Tensor,
        sigma: Tensor,
        sigma_next: Tensor,
        *,
        sigma_max: Tensor | None = None,
        noise: Tensor | None = None,
        prev_sample: Tensor | None = None,
    ) -> SamplerStep:
        """x + v·(σ' - σ); ``noise`` and ``sigma_max`` are unused. A given ``prev_sample`` is returned
        (detached) as the sample, with ``mean`` still the Euler step; ``std_dev_t`` is zeros (B,)."""
        x, velocity = as_f32(x), as_f32(velocity)
        dt = per_sample(sigma_next, x) - per_sample(sigma, x)
        mean = x + velocity * dt
        sample = next_sample(mean, None, None, prev_sample)
        std_dev_t = torch.zeros(x.shape[0], dtype=torch.float32, device=x.device)
        return SamplerStep(sample=sample, mean=mean, std_dev_t=std_dev_t, log_prob=None)
