"""Hook implementations: the ``flow_dppo`` loss and the ``flow_dppo`` algorithm preset.

Only the option class, the config check and the preset table (attrs and stdlib) are imported here; torch and the
loss are imported inside the factory, so listing plugins and checking configs stay fast and work without torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from omni_rl import AlgorithmSpec, LossSpec, hookimpl
from omni_rl_flow_dppo.checks import flow_dppo_loss_check
from omni_rl_flow_dppo.config import FlowDPPOLossConfig
from omni_rl_flow_dppo.presets import flow_dppo_defaults

if TYPE_CHECKING:
    from omni_rl_flow_dppo.loss import FlowDPPOLoss


def _build_flow_dppo_loss(config: FlowDPPOLossConfig, ctx: Any) -> FlowDPPOLoss:
    from omni_rl_flow_dppo.loss import FlowDPPOLoss

    return FlowDPPOLoss(config)


@hookimpl
def omni_rl_losses() -> list[LossSpec]:
    return [
        LossSpec(
            name="flow_dppo",
            factory=_build_flow_dppo_loss,
            config=FlowDPPOLossConfig,
            summary="Flow-DPPO: unclipped per-step ratio objective, steps outside a KL trust region that move away "
            "are dropped; optional KL",
            check=flow_dppo_loss_check,
        )
    ]


@hookimpl
def omni_rl_algorithms() -> list[AlgorithmSpec]:
    return [
        AlgorithmSpec(
            name="flow_dppo",
            summary="Flow-DPPO: Flow-GRPO-Fast's flow_sde window and grpo advantages, flow_dppo loss (KL mask 1e-5)",
            defaults=flow_dppo_defaults(),
        )
    ]
