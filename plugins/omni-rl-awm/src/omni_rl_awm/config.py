"""Options of the ``awm`` loss (``[loss] options``).

Kept free of torch so that ``hooks.py`` can hand this class to the registry (which validates the config
file against it) in milliseconds. The defaults are the loss on its own: the optional KL and EMA-anchor terms
are off and advantages are only clipped (docs/math.md#awm-loss); the ``awm`` preset turns on the reference's recipe.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from omni_rl.validators import (
    fraction,
    is_finite_number,
    non_negative_finite,
    optional_positive_finite,
    positive_finite,
    positive_int,
    unit_interval,
)

Weighting = Literal["uniform", "t", "t_squared", "ghuber"]
WEIGHTINGS: tuple[str, ...] = ("uniform", "t", "t_squared", "ghuber")
TimeSampling = Literal["uniform", "logit_normal", "discrete"]
TIME_SAMPLINGS: tuple[str, ...] = ("uniform", "logit_normal", "discrete")
EMASchedule = Literal["constant", "linear"]
EMA_SCHEDULES: tuple[str, ...] = ("constant", "linear")


def _time_range(instance: Any, attribute: attrs.Attribute, value: tuple[float, ...]) -> None:
    if len(value) != 2 or not all(is_finite_number(v) for v in value):
        raise ValueError(f"time_range must be two numbers [lo, hi], got {list(value)!r}")
    lo, hi = value
    if not 0.0 <= lo <= hi <= 1.0:
        raise ValueError(f"time_range must satisfy 0 <= lo <= hi <= 1, got {[lo, hi]}")


def _schedule_fraction(instance: Any, attribute: attrs.Attribute, value: float) -> None:
    fraction(instance, attribute, value)
    first = 1 if instance.schedule_skip_first else 0
    last = int(instance.schedule_steps * value)
    if last <= first:
        raise ValueError(
            f"schedule_fraction {value} of {instance.schedule_steps} steps leaves no step index in [{first}, "
            f"{last}) to train on; raise schedule_steps or schedule_fraction"
        )


def _float_pair(value: Any) -> tuple[float, ...]:
    """TOML arrays arrive as lists; ints are accepted as floats (``[0, 1]``)."""
    return tuple(float(v) if is_finite_number(v) else v for v in value)


@attrs.frozen(kw_only=True)
class AWMLossConfig:
    """``[loss] name = "awm"``: advantage-weighted flow matching with a clipped ratio (docs/math.md#awm-loss).

    Per sample and timestep draw: ℓ = mean_dims (v_θ(x_t, t) − (ε − x₀))², log p = −w(ℓ, t),
    ρ = exp(log p_θ − log p_old), L = mean max(−Â ρ, −Â clip(ρ, 1 ± clip_ratio))
    + kl_coef · mean (v_θ − v_ref)² + ema_coef · mean (v_θ − v_ema)².
    """

    #: w(ℓ, t): "uniform" ℓ, "t" t·ℓ, "t_squared" t²·ℓ, "ghuber" (t/p)((ℓ + eps)^p − eps^p)
    weighting: Weighting = attrs.field(default="ghuber", validator=attrs.validators.in_(WEIGHTINGS))
    #: p of the generalized-Huber weighting (the reference's ``ghuber_power``)
    ghuber_power: float = attrs.field(default=0.25, converter=float, validator=positive_finite)
    #: eps of the generalized-Huber weighting: keeps its gradient finite at ℓ = 0 (the reference's 1e-10)
    ghuber_eps: float = attrs.field(default=1e-10, converter=float, validator=positive_finite)
    #: timestep draws per sample and update (each one forward and backward); the reference trains 6
    timesteps: int = attrs.field(default=6, validator=positive_int)
    #: how t is drawn, stratified over the ``timesteps`` draws: "uniform" in ``time_range`` or "logit_normal"
    #: (0, 1), both then shifted by ``time_shift``; or "discrete": sigmas of the model's own sampling schedule
    #: of ``schedule_steps`` steps (its shift applied), as the reference's configs train
    time_sampling: TimeSampling = attrs.field(default="uniform", validator=attrs.validators.in_(TIME_SAMPLINGS))
    #: [lo, hi] of the "uniform" draw before the shift (the reference's 0.2 … 1.0)
    time_range: tuple[float, float] = attrs.field(default=(0.2, 1.0), converter=_float_pair, validator=_time_range)
    #: t ← s·t / (1 + (s − 1)·t) for "uniform" and "logit_normal", as SD3's scheduler shifts (1 = no shift)
    time_shift: float = attrs.field(default=3.0, converter=float, validator=positive_finite)
    #: "discrete": length of the sampling schedule whose sigmas are trained (the rollout's steps, to train on
    #: the noise levels the sampler visited)
    schedule_steps: int = attrs.field(default=14, validator=positive_int)
    #: "discrete": skip step 0 (σ = 1, pure noise), as the reference's ``discrete_wo_init``
    schedule_skip_first: bool = True
    #: "discrete": train step indices up to int(schedule_steps · fraction) (the reference's ``timestep_fraction``)
    schedule_fraction: float = attrs.field(default=0.9, converter=float, validator=_schedule_fraction)
    #: ε of the ratio clip [1 − ε, 1 + ε]; every AWM config of the reference uses 1
    clip_ratio: float = attrs.field(default=1.0, converter=float, validator=positive_finite)
    #: advantages are clipped to [−adv_clip_max, adv_clip_max]
    adv_clip_max: float = attrs.field(default=5.0, converter=float, validator=positive_finite)
    #: when set, clipped advantages are rescaled to [−advantage_max, advantage_max] (the reference uses 1)
    advantage_max: float | None = attrs.field(default=None, validator=optional_positive_finite)
    #: β of mean (v_θ − v_ref)²; > 0 makes the update also evaluate the reference (adapters off)
    kl_coef: float = attrs.field(default=0.0, converter=float, validator=non_negative_finite)
    #: β_ema of mean (v_θ − v_ema)²; > 0 keeps an "ema" LoRA adapter that trails the trained one
    ema_coef: float = attrs.field(default=0.0, converter=float, validator=non_negative_finite)
    #: d in ema ← d·ema + (1 − d)·θ, applied once per training step (the cap for the "linear" schedule)
    ema_decay: float = attrs.field(default=0.3, converter=float, validator=unit_interval)
    #: "constant": d = ema_decay; "linear": d = min(ema_decay, ema_decay_ramp · completed training steps)
    ema_decay_schedule: EMASchedule = attrs.field(default="linear", validator=attrs.validators.in_(EMA_SCHEDULES))
    #: slope of the "linear" schedule per completed training step (the reference's 0.001)
    ema_decay_ramp: float = attrs.field(default=0.001, converter=float, validator=non_negative_finite)
