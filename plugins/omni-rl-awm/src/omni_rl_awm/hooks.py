"""Hook implementations: the ``awm``, ``elbo_pg`` and ``v_grpo`` losses and their algorithm presets.

Only the option class (attrs, stdlib) and the preset table are imported here; torch and the loss are imported
inside the factory, so listing plugins and checking configs stay fast and work without torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from omni_rl import AlgorithmSpec, LossSpec, hookimpl
from omni_rl_awm.config import AWMLossConfig
from omni_rl_awm.elbo_config import ELBOPGLossConfig, VGRPOLossConfig
from omni_rl_awm.presets import awm_defaults, elbo_pg_defaults, v_grpo_defaults

if TYPE_CHECKING:
    from omni_rl_awm.elbo_loss import ELBOPolicyLoss
    from omni_rl_awm.loss import AWMLoss


def _build_awm_loss(config: AWMLossConfig, ctx: Any) -> AWMLoss:
    from omni_rl_awm.loss import AWMLoss

    return AWMLoss(config)


def _build_elbo_loss(config: ELBOPGLossConfig | VGRPOLossConfig, ctx: Any) -> ELBOPolicyLoss:
    from omni_rl_awm.elbo_loss import ELBOPolicyLoss

    return ELBOPolicyLoss(config)


@hookimpl
def omni_rl_losses() -> list[LossSpec]:
    return [
        LossSpec(
            name="awm",
            factory=_build_awm_loss,
            config=AWMLossConfig,
            summary="advantage weighted matching: clipped ratio of time-weighted flow-matching losses, "
            "optional KL and EMA anchor",
        ),
        LossSpec(
            name="elbo_pg",
            factory=_build_elbo_loss,
            config=ELBOPGLossConfig,
            summary="ELBO policy gradient (EPG/PEPG): advantage-weighted Monte-Carlo ELBO of the final sample",
        ),
        LossSpec(
            name="v_grpo",
            factory=_build_elbo_loss,
            config=VGRPOLossConfig,
            summary="V-GRPO: clipped ratio of whole-generation ELBOs, group-shared stratified draws, soft clip",
        ),
    ]


@hookimpl
def omni_rl_algorithms() -> list[AlgorithmSpec]:
    return [
        AlgorithmSpec(
            name="awm",
            summary="AWM: ode rollouts, grpo advantages, awm loss (ghuber weighting, KL and EMA anchor)",
            defaults=awm_defaults(),
        ),
        AlgorithmSpec(
            name="elbo_pg",
            summary="ELBO PG: ode rollouts without CFG, grpo advantages, elbo_pg loss (EPG)",
            defaults=elbo_pg_defaults(),
        ),
        AlgorithmSpec(
            name="v_grpo",
            summary="V-GRPO: ode rollouts without CFG, grpo advantages, v_grpo loss",
            defaults=v_grpo_defaults(),
        ),
    ]
