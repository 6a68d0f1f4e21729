"""Hook implementations: the ``grpo_guard`` loss and the ``grpo_guard`` algorithm preset.

Only the option class, the config check and the preset table (attrs and stdlib) are imported here; torch and the
loss are imported inside the factory, so listing plugins and checking configs stay fast and work without torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from omni_rl import AlgorithmSpec, LossSpec, hookimpl
from omni_rl_grpo_guard.checks import grpo_guard_loss_check
from omni_rl_grpo_guard.config import GRPOGuardLossConfig
from omni_rl_grpo_guard.presets import grpo_guard_defaults

if TYPE_CHECKING:
    from omni_rl_grpo_guard.loss import GRPOGuardLoss


def _build_grpo_guard_loss(config: GRPOGuardLossConfig, ctx: Any) -> GRPOGuardLoss:
    from omni_rl_grpo_guard.loss import GRPOGuardLoss

    return GRPOGuardLoss(config)


@hookimpl
def omni_rl_losses() -> list[LossSpec]:
    return [
        LossSpec(
            name="grpo_guard",
            factory=_build_grpo_guard_loss,
            config=GRPOGuardLossConfig,
            summary="GRPO-Guard: clipped PPO on the RatioNorm-normalised ratio, reweighted per step, optional KL",
            check=grpo_guard_loss_check,
        )
    ]


@hookimpl
def omni_rl_algorithms() -> list[AlgorithmSpec]:
    return [
        AlgorithmSpec(
            name="grpo_guard",
            summary="GRPO-Guard: Flow-GRPO-Fast's flow_sde window and grpo advantages, grpo_guard loss (eps 2e-6)",
            defaults=grpo_guard_defaults(),
        )
    ]
