"""Hook implementations: the ``dance_sde`` sampler and the ``dance_grpo`` preset.

Only the option class (attrs, stdlib) and the preset table are imported here; torch and the sampler are imported
inside the factory, so listing plugins stays fast and works without torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from omni_rl import AlgorithmSpec, SamplerSpec, hookimpl
from omni_rl_dance_grpo.config import DanceSDEConfig
from omni_rl_dance_grpo.presets import dance_grpo_defaults

if TYPE_CHECKING:
    from omni_rl_dance_grpo.sampler import DanceSDESampler


def _build_dance_sde(config: DanceSDEConfig, ctx: Any) -> DanceSDESampler:
    from omni_rl_dance_grpo.sampler import DanceSDESampler

    return DanceSDESampler(config)


@hookimpl
def omni_rl_samplers() -> list[SamplerSpec]:
    return [
        SamplerSpec(
            name="dance_sde",
            factory=_build_dance_sde,
            config=DanceSDEConfig,
            summary="DanceGRPO SDE step, std eta*sqrt(sigma - sigma'), exact Gaussian log-prob (SDE window, "
            "timestep_fraction)",
        )
    ]


@hookimpl
def omni_rl_algorithms() -> list[AlgorithmSpec]:
    return [
        AlgorithmSpec(
            name="dance_grpo",
            summary="DanceGRPO: dance_sde (eta 0.3) over every step but the last, 60% of them trained per sample, "
            "one x_T per group, grpo within groups (sample std, per-reward advantages), clipped PPO loss",
            defaults=dance_grpo_defaults(),
        )
    ]
