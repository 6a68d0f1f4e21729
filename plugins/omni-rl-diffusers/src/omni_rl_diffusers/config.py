"""Options of the in-worker diffusers rollout backend."""

from __future__ import annotations

from typing import Any, Literal

import attrs

from omni_rl.validators import image_side


def _positive(instance: Any, attribute: attrs.Attribute, value: float) -> None:
    if value <= 0:
        raise ValueError(f"must be > 0, got {value!r}")


@attrs.frozen(kw_only=True)
class DiffusersRolloutConfig:
    """``[rollout] name = "diffusers"``.

    ``steps`` and ``cfg`` are the training rollout's schedule length and guidance scale; ``eval_steps`` and
    ``eval_cfg`` the validation (ODE) rollout's. ``batch_size`` caps how many samples go through the transformer
    at once (memory), and does not change the images: noise is drawn per sample from its own seed.
    """

    group_size: int = attrs.field(default=8, validator=_positive)
    steps: int = attrs.field(default=10, validator=_positive)
    eval_steps: int = attrs.field(default=20, validator=_positive)
    height: int = attrs.field(default=512, validator=image_side)
    width: int = attrs.field(default=512, validator=image_side)
    cfg: float = attrs.field(default=4.5, validator=attrs.validators.ge(0.0))
    #: validation guidance scale; defaults to ``cfg``
    eval_cfg: float | None = None
    batch_size: int = attrs.field(default=8, validator=_positive)
    #: DanceGRPO's shared initial noise: every sample of a group starts from the same x_T (drawn from the run
    #: seed, step and group), so the reward spread inside a group comes from the SDE window's noise alone, the
    #: part of the trajectory the policy gradient can credit. Training rollouts only; validation is unchanged.
    shared_initial_noise: bool = False
    #: the training rollout's compute precision: "bfloat16" runs the transformer under autocast while the update
    #: recomputes in the model's own dtype (float32), the engine mismatch [rollout_correction] measures and corrects
    #: (docs/distributed.md); "model" keeps the model's dtype. Validation always uses the model's dtype.
    dtype: Literal["model", "bfloat16"] = "model"
