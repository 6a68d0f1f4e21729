"""Options of the ELBO-likelihood losses ``elbo_pg`` and ``v_grpo`` (``[loss] options``; docs/math.md#elbo-likelihood).

Torch-free, like :mod:`omni_rl_awm.config`, so ``hooks.py`` hands these classes to the registry in milliseconds.
Both losses score a finished sample x₀ by a Monte-Carlo ELBO over ``draws`` (t, ε) pairs computed from x₀ alone;
they differ in the objective around it. The time-draw and weighting options are AWM's and mean the same
(:class:`omni_rl_awm.config.AWMLossConfig`): the loss builds one internally and reuses AWM's draws and weightings.

Sources (arXiv 2602.04663 for ``elbo_pg``, arXiv 2604.23380 for ``v_grpo``). The stores this project reads hold
these papers' summaries, not their code or appendix tables, so only the summarised facts are taken as the papers'
(final-sample ELBO, simple PG objectives, ODE rollouts, CFG off in training, clipping and advantage normalisation
mattering little for EPG; group-shared (t, ε), stratified t, adaptive loss weighting, ratio clipping, KL and soft
advantage clipping for V-GRPO). Every numeric default here is this project's, chosen on the shapes benchmark and
said so in docs/algorithms.md.
"""

from __future__ import annotations

from typing import Literal

import attrs

from omni_rl.validators import non_negative_finite, positive_finite, positive_int
from omni_rl_awm.config import TIME_SAMPLINGS, WEIGHTINGS, TimeSampling, Weighting, _float_pair, _time_range

Objective = Literal["epg", "pepg"]
OBJECTIVES: tuple[str, ...] = ("epg", "pepg")


@attrs.frozen(kw_only=True)
class ELBOOptions:
    """What both ELBO losses share: the Monte-Carlo ELBO of a finished sample (docs/math.md#elbo-likelihood).

    ELBO(x₀) ≈ −(1/K) Σ_k λ_k·w(ℓ_k, t_k), ℓ_k = mean_dims (v(x_{t_k}, t_k) − (ε_k − x₀))², x_t = (1 − t)·x₀ + t·ε,
    every draw of a sample evaluated in one velocity call (so the ratio can be of the whole ELBO).
    """

    #: K, the (t, ε) pairs per sample and update; the velocity call of one micro-batch holds micro_batch·K rows
    draws: int = attrs.field(default=4, validator=positive_int)
    #: w(ℓ, t) as AWM's ("uniform" ℓ: the plain flow-matching error, as the ELBO PG paper scores samples)
    weighting: Weighting = attrs.field(default="uniform", validator=attrs.validators.in_(WEIGHTINGS))
    ghuber_power: float = attrs.field(default=0.25, converter=float, validator=positive_finite)
    #: how t is drawn: AWM's "uniform" (in ``time_range``, then shifted), "logit_normal" or "discrete"
    time_sampling: TimeSampling = attrs.field(default="uniform", validator=attrs.validators.in_(TIME_SAMPLINGS))
    #: [lo, hi] of the uniform draw before the shift
    time_range: tuple[float, float] = attrs.field(default=(0.0, 1.0), converter=_float_pair, validator=_time_range)
    #: t ← s·t / (1 + (s − 1)·t); 1 = no shift (the ELBO's uniform t)
    time_shift: float = attrs.field(default=1.0, converter=float, validator=positive_finite)
    #: "discrete": the sampling schedule whose sigmas are drawn (follow ``[rollout] steps``)
    schedule_steps: int = attrs.field(default=10, validator=positive_int)
    #: stratify the K draws of a sample: draw k takes t from stratum [k/K, (k+1)/K) (False: K independent t)
    stratified: bool = True
    #: advantages are clipped to [−adv_clip_max, adv_clip_max]
    adv_clip_max: float = attrs.field(default=5.0, converter=float, validator=positive_finite)


@attrs.frozen(kw_only=True)
class ELBOPGLossConfig(ELBOOptions):
    """``[loss] name = "elbo_pg"`` (arXiv 2602.04663's EPG / PEPG): a simple policy gradient on the ELBO.

    - ``"epg"``: L = −mean_b Â_b·ELBO_θ(x₀,b) (REINFORCE with the ELBO as log-likelihood; no old policy);
    - ``"pepg"``: L = mean_b max(−Â_b·ρ_b, −Â_b·clip(ρ_b, 1 ± clip_ratio)), ρ_b = exp(ELBO_θ − ELBO_old).
    """

    objective: Objective = attrs.field(default="epg", validator=attrs.validators.in_(OBJECTIVES))
    #: ε of PEPG's ratio clip (the paper reports the clip matters little; ``objective = "pepg"`` only)
    clip_ratio: float = attrs.field(default=0.2, converter=float, validator=positive_finite)


@attrs.frozen(kw_only=True)
class VGRPOLossConfig(ELBOOptions):
    """``[loss] name = "v_grpo"`` (arXiv 2604.23380): GRPO with the whole generation as one action.

    ρ_b = exp(ELBO_θ(x₀,b) − ELBO_old(x₀,b)); L = mean_b max(−Â_b·ρ_b, −Â_b·clip(ρ_b, 1 ± clip_ratio))
    + kl_coef·mean (v_θ − v_ref)², with the variance controls below.
    """

    #: every sample of a prompt group uses the same K (t, ε) pairs, so the ELBO differences inside a group (what
    #: the group-relative advantages weigh) carry no draw noise; needs whole groups per micro-batch
    group_shared_draws: bool = True
    #: λ_k = 1 / sg(mean over the group of ℓ_old at draw k): every draw's error on one scale (this project's
    #: reading of the paper's adaptive loss weighting; docs/math.md#v-grpo-loss)
    adaptive_weighting: bool = True
    #: ε of the ratio clip on the whole-generation ratio
    clip_ratio: float = attrs.field(default=0.2, converter=float, validator=positive_finite)
    #: β of mean (v_θ − v_ref)² at the same (t, ε); > 0 also evaluates the reference (adapters off)
    kl_coef: float = attrs.field(default=0.0, converter=float, validator=non_negative_finite)
    #: soft advantage clipping Â = c·tanh(A / c) with c = adv_soft_clip (0 = the hard clip at adv_clip_max)
    adv_soft_clip: float = attrs.field(default=2.0, converter=float, validator=non_negative_finite)
