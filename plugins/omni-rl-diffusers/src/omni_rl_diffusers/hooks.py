"""Hook implementations of omni-rl-diffusers: the in-worker ``diffusers`` rollout backend."""

from __future__ import annotations

from typing import Any

from omni_rl import RolloutSpec, hookimpl
from omni_rl_diffusers.config import DiffusersRolloutConfig
from omni_rl_diffusers.frames import frames_check


def _build(config: DiffusersRolloutConfig, ctx: Any) -> Any:
    from omni_rl_diffusers.backend import DiffusersRollout

    return DiffusersRollout(config)


@hookimpl
def omni_rl_rollout_backends() -> list[RolloutSpec]:
    return [
        RolloutSpec(
            name="diffusers",
            factory=_build,
            config=DiffusersRolloutConfig,
            summary="Sample inside the policy workers with the model's own transformer (no weight copy)",
            check=frames_check,
        )
    ]
