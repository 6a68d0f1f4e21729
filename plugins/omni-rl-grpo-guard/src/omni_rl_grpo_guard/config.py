"""Options of the ``grpo_guard`` loss.

Stdlib and attrs only: ``hooks.py`` hands this class to the registry (which validates ``[loss] options`` against
it) without importing torch.
"""

from __future__ import annotations

import attrs

from omni_rl.validators import non_negative_finite, positive_finite


@attrs.frozen(kw_only=True)
class GRPOGuardLossConfig:
    """Options of ``grpo_guard``: clipped PPO on the RatioNorm-normalised ratio, reweighted per step
    (docs/math.md#grpo-guard-loss).

    ``clip_ratio`` bounds the *normalised* ratio exp((log π_θ − log π_old + b)·c), whose log is about c times
    Flow-GRPO's (c = the step's std of x'), so its ε is on a different scale than ``flow_grpo``'s.
    """

    #: ε of the clip [1 − ε, 1 + ε] on the normalised ratio; 2e-6 is VeRL-Omni's GRPO-Guard recipe
    #: (docs/math.md#grpo-guard-loss)
    clip_ratio: float = attrs.field(default=2e-6, converter=float, validator=positive_finite)
    #: advantages are clipped to [−adv_clip_max, adv_clip_max] before the objective, as in flow_grpo
    adv_clip_max: float = attrs.field(default=5.0, converter=float, validator=positive_finite)
    #: β of the KL-to-reference term (flow_grpo's); > 0 makes the update also evaluate the reference (adapters off)
    kl_coef: float = attrs.field(default=0.0, converter=float, validator=non_negative_finite)
    #: divide each sample's clipped term by its step's −dt (the paper's gradient reweighting across noise levels);
    #: false keeps only RatioNorm (the paper's ablation of the two parts)
    step_reweight: bool = attrs.field(default=True, validator=attrs.validators.instance_of(bool))
