"""Hook implementations: the ``sft`` loss and the ``online_sft`` (RAFT) and ``sft_offline`` presets.

Only the option class is imported here; torch and the loss are imported inside the factory."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from omni_rl import AlgorithmSpec, LossSpec, hookimpl
from omni_rl_sft.config import SFTLossConfig
from omni_rl_sft.presets import online_sft_defaults, sft_offline_defaults

if TYPE_CHECKING:
    from omni_rl_sft.loss import SFTLoss


def _build_sft_loss(config: SFTLossConfig, ctx: Any) -> SFTLoss:
    from omni_rl_sft.loss import SFTLoss

    return SFTLoss(config)


@hookimpl
def omni_rl_losses() -> list[LossSpec]:
    return [
        LossSpec(
            name="sft",
            factory=_build_sft_loss,
            config=SFTLossConfig,
            summary="supervised flow matching on demonstrations: each group's best sample (RAFT) or chosen images",
        )
    ]


@hookimpl
def omni_rl_algorithms() -> list[AlgorithmSpec]:
    return [
        AlgorithmSpec(
            name="online_sft",
            summary="online SFT (RAFT): ode rollouts in groups of 8, flow matching on each group's best sample",
            defaults=online_sft_defaults(),
        ),
        AlgorithmSpec(
            name="sft_offline",
            summary="offline SFT on the chosen images of a preference .jsonl (prompt, chosen, rejected)",
            defaults=sft_offline_defaults(),
        ),
    ]
