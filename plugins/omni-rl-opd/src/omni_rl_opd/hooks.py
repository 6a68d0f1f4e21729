"""Hook implementations: the ``opd`` loss and preset (option classes only; torch is imported in the factory)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from omni_rl import AlgorithmSpec, LossSpec, hookimpl
from omni_rl_opd.config import OPDLossConfig

if TYPE_CHECKING:
    from omni_rl_opd.loss import OPDLoss


def _build_opd_loss(config: OPDLossConfig, ctx: Any) -> OPDLoss:
    from omni_rl_opd.loss import OPDLoss

    return OPDLoss(config)


@hookimpl
def omni_rl_losses() -> list[LossSpec]:
    return [
        LossSpec(
            name="opd",
            factory=_build_opd_loss,
            config=OPDLossConfig,
            summary="on-policy distillation: per-step KL (or velocity MSE) to a frozen teacher on the student's states",
        )
    ]


@hookimpl
def omni_rl_algorithms() -> list[AlgorithmSpec]:
    return [
        AlgorithmSpec(
            name="opd",
            summary="on-policy distillation into a 4-step student: the base model (LoRA off) as teacher",
            defaults={
                # the rollout only scores the student for the logs (grpo needs groups of 2+); the loss rolls out itself
                "sampler": {"name": "ode"},
                "rollout": {"name": "diffusers", "options": {"group_size": 2, "steps": 4, "cfg": 1.0}},
                "advantage": {"name": "grpo"},
                "loss": {"name": "opd", "options": {"steps": 4, "teacher_substeps": 1, "objective": "kl"}},
            },
        )
    ]
