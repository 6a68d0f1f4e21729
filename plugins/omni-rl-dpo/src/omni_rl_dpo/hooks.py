"""Hook implementations: the ``dpo`` and ``dgpo`` losses, the ``preference_pairs`` rollout backend and the two presets.

Only the option classes (attrs, stdlib) are imported here; torch and the component code are imported inside the
factories, so listing plugins stays fast and works without torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from omni_rl import AlgorithmSpec, LossSpec, RolloutSpec, hookimpl
from omni_rl_dpo.config import DGPOLossConfig, DPOLossConfig, PreferencePairsConfig
from omni_rl_dpo.presets import dgpo_defaults, dpo_defaults, dpo_offline_defaults

if TYPE_CHECKING:
    from omni_rl_dpo.dgpo import DGPOLoss
    from omni_rl_dpo.loss import DPOLoss
    from omni_rl_dpo.preference_rollout import PreferencePairsRollout


def _build_dpo_loss(config: DPOLossConfig, ctx: Any) -> DPOLoss:
    from omni_rl_dpo.loss import DPOLoss

    return DPOLoss(config)


def _build_dgpo_loss(config: DGPOLossConfig, ctx: Any) -> DGPOLoss:
    from omni_rl_dpo.dgpo import DGPOLoss

    return DGPOLoss(config)


def _build_preference_pairs(config: PreferencePairsConfig, ctx: Any) -> PreferencePairsRollout:
    from omni_rl_dpo.preference_rollout import PreferencePairsRollout

    return PreferencePairsRollout(config)


@hookimpl
def omni_rl_losses() -> list[LossSpec]:
    return [
        LossSpec(
            name="dpo",
            factory=_build_dpo_loss,
            config=DPOLossConfig,
            summary="Diffusion-DPO (flow form): shared t and noise per (chosen, rejected) pair, reference view",
        ),
        LossSpec(
            name="dgpo",
            factory=_build_dgpo_loss,
            config=DGPOLossConfig,
            summary="Group-level DPO: every sample of a group, advantage-weighted, one sigmoid per group",
        ),
    ]


@hookimpl
def omni_rl_rollout_backends() -> list[RolloutSpec]:
    return [
        RolloutSpec(
            name="preference_pairs",
            factory=_build_preference_pairs,
            config=PreferencePairsConfig,
            summary="offline (prompt, chosen, rejected) image pairs from [data] train, VAE-encoded once",
        )
    ]


@hookimpl
def omni_rl_algorithms() -> list[AlgorithmSpec]:
    return [
        AlgorithmSpec(
            name="dpo",
            summary="online Diffusion-DPO: ode rollouts in groups of 8, best vs worst reward per group",
            defaults=dpo_defaults(),
        ),
        AlgorithmSpec(
            name="dpo_offline",
            summary="offline Diffusion-DPO on a preference .jsonl (prompt, chosen, rejected images)",
            defaults=dpo_offline_defaults(),
        ),
        AlgorithmSpec(
            name="dgpo",
            summary="online group-level DPO: ode rollouts in groups of 8, all samples advantage-weighted, beta 100",
            defaults=dgpo_defaults(),
        ),
    ]
