"""Options of the in-worker diffusers rollout backend."""

from __future__ import annotations

from typing import Literal

import attrs

from omni_rl.validators import count_or_auto, image_side, non_negative_finite, positive_int


@attrs.frozen(kw_only=True)
class DiffusersRolloutConfig:
    """``[rollout] name = "diffusers"``.

    ``steps`` and ``cfg`` are the training rollout's schedule length and guidance scale; ``eval_steps`` and
    ``eval_cfg`` the validation (ODE) rollout's. ``batch_size`` caps how many samples go through the transformer
    at once (memory), and does not change the images: noise is drawn per sample from its own seed (only the float
    rounding of batched matmuls depends on it). ``batch_size = "auto"``: the largest size that fits, probed once per
    run, device and image shape on a GPU (omni_rl.auto_batch), the whole request in one call on the CPU; the value
    it resolved to is logged (``rollout/batch_size``).
    """

    group_size: int = attrs.field(default=8, validator=positive_int)
    steps: int = attrs.field(default=10, validator=positive_int)
    eval_steps: int = attrs.field(default=20, validator=positive_int)
    height: int = attrs.field(default=512, validator=image_side)
    width: int = attrs.field(default=512, validator=image_side)
    cfg: float = attrs.field(default=4.5, validator=non_negative_finite)
    #: validation guidance scale; defaults to ``cfg``
    eval_cfg: float | None = None
    #: frames per sample for a video model (``modality = "video"``, e.g. wan: 4k + 1); images take 1 (the default)
    num_frames: int = attrs.field(default=1, validator=positive_int)
    #: frames per second of the sample and val videos the run directory gets (video models only)
    fps: int = attrs.field(default=16, validator=positive_int)
    #: samples per transformer call, or "auto" (the largest that fits; see the class docstring)
    batch_size: int | Literal["auto"] = attrs.field(default=8, validator=count_or_auto(1_000_000))
    #: DanceGRPO's shared initial noise: every sample of a group starts from the same x_T (drawn from the run
    #: seed, step and group), so the reward spread inside a group comes from the SDE window's noise alone, the
    #: part of the trajectory the policy gradient can credit. Training rollouts only; validation is unchanged.
    shared_initial_noise: bool = False
    #: the training rollout's compute precision: "bfloat16" runs the transformer under autocast while the update
    #: recomputes in the model's own dtype (float32), the engine mismatch [rollout_correction] measures and corrects
    #: (docs/distributed.md); "model" keeps the model's dtype. Validation always uses the model's dtype.
    dtype: Literal["model", "bfloat16"] = "model"
