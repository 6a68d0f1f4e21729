"""Hook implementations: the ``awm`` loss and the ``awm`` algorithm preset.

Only the option class (attrs, stdlib) and the preset table are imported here; torch and the loss are imported
inside the factory, so listing plugins and checking configs stay fast and work without torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from omni_rl import AlgorithmSpec, LossSpec, hookimpl
from omni_rl_awm.config import AWMLossConfig
from omni_rl_awm.presets import awm_defaults

if TYPE_CHECKING:
    from omni_rl_awm.loss import AWMLoss


def _build_awm_loss(config: AWMLossConfig, ctx: Any) -> AWMLoss:
    from omni_rl_awm.loss import AWMLoss

    return AWMLoss(config)


@hookimpl
def omni_rl_losses() -> list[LossSpec]:
    return [
        LossSpec(
            name="awm",
            factory=_build_awm_loss,
            config=AWMLossConfig,
            summary="advantage weighted matching: clipped ratio of time-weighted flow-matching losses, "
            "optional KL and EMA anchor",
        )
    ]


@hookimpl
def omni_rl_algorithms() -> list[AlgorithmSpec]:
    return [
        AlgorithmSpec(
            name="awm",
            summary="AWM: ode rollouts, grpo advantages, awm loss (ghuber weighting, KL and EMA anchor)",
            defaults=awm_defaults(),
        )
    ]
