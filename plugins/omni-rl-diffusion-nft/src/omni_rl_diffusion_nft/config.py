"""Options of the ``diffusion_nft`` loss (``[loss] options``).

Kept free of torch so that ``hooks.py`` can hand this class to the registry (which validates the config file
against it) in milliseconds. The defaults are the reference implementation's (NVlabs/DiffusionNFT,
``config/base.py`` and ``config/nft.py`` for SD3.5-Medium), so the ``diffusion_nft`` preset only has to name
them.
"""

from __future__ import annotations

from typing import Literal

import attrs

from omni_rl.validators import fraction, non_negative_finite, non_negative_int, positive_finite, positive_int

RewardMode = Literal["all", "positive_only", "negative_only", "one_only", "binary"]
REWARD_MODES: tuple[str, ...] = ("all", "positive_only", "negative_only", "one_only", "binary")
OldDecay = Literal["copy", "ramp", "delayed_ramp"]
OLD_DECAYS: tuple[str, ...] = ("copy", "ramp", "delayed_ramp")
Refresh = Literal["update", "optimizer_step"]
REFRESHES: tuple[str, ...] = ("update", "optimizer_step")


def _trained_timesteps_fit(instance: DiffusionNFTLossConfig, attribute: attrs.Attribute, value: int) -> None:
    """Run last (``timesteps`` is the last field): the count must be between 1 and ``num_steps``."""
    count = instance.train_timesteps
    if not 1 <= count <= instance.num_steps:
        source = (
            f"timesteps = {value}"
            if value
            else f"int(num_steps x timestep_fraction) = int({instance.num_steps} x {instance.timestep_fraction})"
        )
        raise ValueError(
            f"{source} timesteps per sample: must be between 1 and num_steps ({instance.num_steps}), since each "
            "sample trains on distinct timesteps of the schedule"
        )


@attrs.frozen(kw_only=True)
class DiffusionNFTLossConfig:
    """``[loss] name = "diffusion_nft"``: DiffusionNFT's negative-aware fine-tuning objective
    (docs/math.md#diffusionnft-loss).

    Per sample and trained timestep t: r = reward probability of the sample's advantage (``reward_mode``);
    x_t = (1 − t)x₀ + tε; v⁺ = βv_θ + (1 − β)v_old, v⁻ = (1 + β)v_old − βv_θ; x̂₀^± = x_t − t·v^±;
    L = adv_clip_max · mean_b[(r‖x̂₀⁺ − x₀‖²/w⁺ + (1 − r)‖x̂₀⁻ − x₀‖²/w⁻)/β] + kl_coef · mean (v_θ − v_ref)².
    """

    #: β of the implicit policies v^± (the reference's ``config.beta``: 1.0 for SD3.5, 0.1 for its OCR and
    #: multi-reward configs); the loss is divided by it
    beta: float = attrs.field(default=1.0, converter=float, validator=positive_finite)
    #: advantages are clipped to ±adv_clip_max, mapped to r ∈ [0, 1], and the loss is scaled by it
    adv_clip_max: float = attrs.field(default=5.0, converter=float, validator=positive_finite)
    #: advantage → reward probability: "all" r = clip(A)/(2·max) + ½; "positive_only" / "negative_only" first
    #: clamp A to ≥ 0 / ≤ 0; "one_only" uses 1 for A > 0 else 0; "binary" uses sign(A) (the reference's
    #: ``adv_mode``)
    reward_mode: RewardMode = attrs.field(default="all", validator=attrs.validators.in_(REWARD_MODES))
    #: β_KL of the KL-to-reference term mean (v_θ − v_ref)² (the reference's ``train.beta``, 1e-4); > 0 adds the
    #: reference view (adapters off) to every trained timestep
    kl_coef: float = attrs.field(default=1e-4, converter=float, validator=non_negative_finite)
    #: old ← d·old + (1 − d)·θ with d(i), i = optimizer steps taken: "copy" d = 0; "ramp" min(0.001·i, 0.5);
    #: "delayed_ramp" 0 before i = 75 then min(0.0075·(i − 75), 0.999) (the reference's decay_type 0 / 1 / 2)
    old_decay: OldDecay = attrs.field(default="ramp", validator=attrs.validators.in_(OLD_DECAYS))
    #: when the old adapter is refreshed: "update" once per training step, after all its optimizer steps (the
    #: reference: once per sampling round), or "optimizer_step" after every optimizer step
    refresh: Refresh = attrs.field(default="update", validator=attrs.validators.in_(REFRESHES))
    #: length of the sampling schedule whose sigmas are the training timesteps (the model's own shifted schedule
    #: for this many steps); the reference trains on its rollout schedule, so keep it equal to [rollout] steps
    num_steps: int = attrs.field(default=10, validator=positive_int)
    #: trained timesteps per sample = int(num_steps × timestep_fraction), distinct, drawn per epoch (0.99 in the
    #: reference: 9 of 10)
    timestep_fraction: float = attrs.field(default=0.99, converter=float, validator=fraction)
    #: an explicit count of trained timesteps per sample instead of the fraction (0: use the fraction)
    timesteps: int = attrs.field(default=0, validator=[non_negative_int, _trained_timesteps_fit])

    @property
    def train_timesteps(self) -> int:
        """Trained timesteps per sample and update (each one forward of every view and one backward)."""
        if self.timesteps:
            return self.timesteps
        return int(self.num_steps * self.timestep_fraction)
