"""Hook implementations: Flow-GRPO's samplers, advantage, loss and algorithm preset.

Only the option classes (attrs, stdlib) are imported here; torch and the component code are imported
inside the factories, so listing plugins stays fast and works without torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from omni_rl import AdvantageSpec, AlgorithmSpec, LossSpec, SamplerSpec, hookimpl
from omni_rl_flow_grpo.checks import flow_grpo_loss_check, grpo_advantage_check
from omni_rl_flow_grpo.config import (
    CPSConfig,
    FlowGRPOLossConfig,
    FlowSDEConfig,
    GRPOAdvantageConfig,
    ODEConfig,
)
from omni_rl_flow_grpo.presets import flow_grpo_defaults

if TYPE_CHECKING:
    from omni_rl_flow_grpo.advantage import GRPOAdvantage
    from omni_rl_flow_grpo.loss import FlowGRPOLoss
    from omni_rl_flow_grpo.samplers.cps import CPSSampler
    from omni_rl_flow_grpo.samplers.flow_sde import FlowSDESampler
    from omni_rl_flow_grpo.samplers.ode import ODESampler


def _build_flow_sde(config: FlowSDEConfig, ctx: Any) -> FlowSDESampler:
    from omni_rl_flow_grpo.samplers.flow_sde import FlowSDESampler

    return FlowSDESampler(config)


def _build_cps(config: CPSConfig, ctx: Any) -> CPSSampler:
    from omni_rl_flow_grpo.samplers.cps import CPSSampler

    return CPSSampler(config)


def _build_ode(config: ODEConfig, ctx: Any) -> ODESampler:
    from omni_rl_flow_grpo.samplers.ode import ODESampler

    return ODESampler(config)


def _build_grpo(config: GRPOAdvantageConfig, ctx: Any) -> GRPOAdvantage:
    from omni_rl_flow_grpo.advantage import GRPOAdvantage

    return GRPOAdvantage(config)


def _build_flow_grpo_loss(config: FlowGRPOLossConfig, ctx: Any) -> FlowGRPOLoss:
    from omni_rl_flow_grpo.loss import FlowGRPOLoss

    return FlowGRPOLoss(config)


@hookimpl
def omni_rl_samplers() -> list[SamplerSpec]:
    return [
        SamplerSpec(
            name="flow_sde",
            factory=_build_flow_sde,
            config=FlowSDEConfig,
            summary="Flow-GRPO SDE step with Gaussian log-prob (noise level a, SDE window)",
        ),
        SamplerSpec(
            name="cps",
            factory=_build_cps,
            config=CPSConfig,
            summary="coefficients-preserving sampling (noise level eta, SDE window), log p = -mean (x'-mu)^2",
        ),
        SamplerSpec(
            name="ode",
            factory=_build_ode,
            config=ODEConfig,
            summary="deterministic Euler step x' = x + v*dt (validation, steps outside the window)",
        ),
    ]


@hookimpl
def omni_rl_advantage_estimators() -> list[AdvantageSpec]:
    return [
        AdvantageSpec(
            name="grpo",
            factory=_build_grpo,
            config=GRPOAdvantageConfig,
            summary="(r - group mean) / (global or group std + eps); std_normalize = false is Dr.GRPO",
            check=grpo_advantage_check,
        )
    ]


@hookimpl
def omni_rl_losses() -> list[LossSpec]:
    return [
        LossSpec(
            name="flow_grpo",
            factory=_build_flow_grpo_loss,
            config=FlowGRPOLossConfig,
            summary="clipped PPO on per-step log-probs, advantage clipping, optional KL to the reference",
            check=flow_grpo_loss_check,
        )
    ]


@hookimpl
def omni_rl_algorithms() -> list[AlgorithmSpec]:
    return [
        AlgorithmSpec(
            name="flow_grpo",
            summary="Flow-GRPO(-Fast): flow_sde in a 2-step SDE window, grpo advantages, clipped PPO loss",
            defaults=flow_grpo_defaults(),
        )
    ]
