"""The plugin's hook implementations: one advantage estimator, ``rloo``.

This module is what the ``omni_rl`` entry point names. It imports only the options class; torch and the
estimator are imported in the factory, when a run builds it, so ``omni-rl plugins`` and ``omni-rl check`` stay
fast and work without torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from omni_rl.hookspecs import hookimpl
from omni_rl.specs import AdvantageSpec
from omni_rl_rloo.config import RLOOConfig

if TYPE_CHECKING:
    from omni_rl_rloo.advantage import RLOOAdvantage


def _build_rloo(config: RLOOConfig, ctx: Any) -> RLOOAdvantage:
    from omni_rl_rloo.advantage import RLOOAdvantage

    return RLOOAdvantage(config)


@hookimpl
def omni_rl_advantage_estimators() -> list[AdvantageSpec]:
    return [
        AdvantageSpec(
            name="rloo",
            factory=_build_rloo,
            config=RLOOConfig,
            summary="REINFORCE leave-one-out: reward minus the mean of the group's other rewards",
        )
    ]
