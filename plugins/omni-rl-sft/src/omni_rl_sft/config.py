"""Options of the ``sft`` loss (kept apart so ``hooks.py`` registers them without importing torch)."""

from __future__ import annotations

from typing import Literal

import attrs
from omni_rl_dpo.config import check_timestep_range, float_pair

from omni_rl.validators import finite, non_negative_finite, positive_finite, positive_int

SELECTIONS: tuple[str, ...] = ("all", "best", "chosen")


@attrs.frozen(kw_only=True)
class SFTLossConfig:
    """``[loss] name = "sft"``: L = mean over the selected samples of mean_dims (v_θ(x_t, t) - (ε - x₀))²
    (docs/math.md#sft-loss).

    ``select`` says which samples are demonstrations: ``"all"`` (every sample), ``"best"`` (the best reward of
    each group: online SFT, RAFT), ``"chosen"`` (the first of each group: the chosen image of the
    ``preference_pairs`` backend, i.e. SFT on a preference file's winners).
    """

    select: Literal["all", "best", "chosen"] = attrs.field(default="best", validator=attrs.validators.in_(SELECTIONS))
    #: "best": groups whose best - worst reward is not above this are skipped (and counted); 0 skips only ties
    min_reward_spread: float = attrs.field(default=0.0, converter=float, validator=non_negative_finite)
    #: t = lo + (hi - lo)·sigmoid(logit_mean + logit_std·z): SD3's logit-normal training density by default
    logit_mean: float = attrs.field(default=0.0, converter=float, validator=finite)
    logit_std: float = attrs.field(default=1.0, converter=float, validator=positive_finite)
    timestep_range: tuple[float, float] = attrs.field(
        default=(0.0, 1.0), converter=float_pair, validator=check_timestep_range
    )
    #: (t, ε) draws per sample and update, each its own forward/backward
    timesteps: int = attrs.field(default=1, validator=positive_int)
