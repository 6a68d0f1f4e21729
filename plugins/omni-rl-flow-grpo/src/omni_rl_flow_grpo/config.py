"""Option records of every component in this plugin.

Kept apart from the component modules so that ``hooks.py`` can hand these classes to the registry (which
validates each section's ``options`` against them) without importing torch.
"""

from __future__ import annotations

from typing import Any

import attrs

from omni_rl.validators import non_negative_finite, positive_finite, unit_interval, with_hint
from omni_rl_flow_grpo.samplers.window import WindowConfig

#: how several ``[[reward]]`` sections become one advantage (docs/math.md#multi-reward-aggregation)
REWARD_AGGREGATIONS: tuple[str, ...] = ("reward", "advantage")


def _std_ddof(instance: Any, attribute: attrs.Attribute, value: int) -> None:
    if isinstance(value, bool) or value not in (0, 1):
        raise ValueError(
            f"{attribute.name} must be 0 (population std, as flow_grpo's stat tracker) or 1 (sample std, as "
            f"VeRL-Omni and torch.std), got {value!r}"
        )


def _aggregate(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    if value not in REWARD_AGGREGATIONS:
        raise ValueError(
            f'{attribute.name} must be "reward" (normalise the weighted reward sum) or "advantage" (normalise each '
            f"reward alone, then sum the advantages with the reward weights), got {value!r}"
        )


@attrs.frozen(kw_only=True)
class FlowSDEConfig(WindowConfig):
    """Options of ``flow_sde``: Flow-GRPO's SDE with noise level ``a`` and the SDE window.

    ``noise_level = 0`` turns it into the Euler ODE step (no log-prob, nothing to train).
    """

    #: a in s = a·sqrt(σ / (1 - σ)); Flow-GRPO uses 0.7 (0.8 in its fast configs, 0.9 for FLUX)
    noise_level: float = attrs.field(default=0.7, converter=float, validator=non_negative_finite)


@attrs.frozen(kw_only=True)
class CPSConfig(WindowConfig):
    """Options of ``cps`` (Coefficients-Preserving Sampling) with the SDE window."""

    #: η in s = σ'·sin(η·π/2), between 0 and 1; the reference's CPS configs use 0.8
    noise_level: float = attrs.field(
        default=0.8, converter=float, validator=with_hint(unit_interval, "the noise angle is eta * pi / 2")
    )


@attrs.frozen(kw_only=True)
class ODEConfig:
    """``ode`` takes no options: it is the deterministic Euler step x' = x + v·dt."""


@attrs.frozen(kw_only=True)
class GRPOAdvantageConfig:
    """Options of the ``grpo`` advantage: A = (r - group mean) / (std + eps), or r - group mean, and how several
    rewards are combined (``aggregate``, read by the trainer through ``GRPOAdvantage.reward_aggregation()``)."""

    #: std over the whole batch (Flow-GRPO's default) instead of within each prompt's group
    global_std: bool = True
    #: divide by (std + eps); False is Dr.GRPO (A = r - group mean)
    std_normalize: bool = True
    #: added to the std so a constant-reward batch gives A = 0 rather than 0/0 (reference: 1e-4)
    eps: float = attrs.field(default=1e-4, converter=float, validator=positive_finite)
    #: delta degrees of freedom of the std (global and per group): 0 = population std (flow_grpo's stat tracker),
    #: 1 = sample std (VeRL-Omni, DanceGRPO and MixGRPO's torch.std); a batch or group of one then has std 0
    std_ddof: int = attrs.field(default=0, validator=_std_ddof)
    #: several rewards: "reward" normalises sum_k w_k r_k (Flow-GRPO); "advantage" normalises each r_k alone and
    #: uses sum_k w_k A_k (MixGRPO's advantage_aggr, DanceGRPO's multi-reward training)
    aggregate: str = attrs.field(default="reward", validator=_aggregate)


@attrs.frozen(kw_only=True)
class FlowGRPOLossConfig:
    """Options of the ``flow_grpo`` loss (clipped PPO on per-step log-probs, optional KL to the reference)."""

    #: ε of the ratio clip [1 - ε, 1 + ε]; tiny because log-probs are means over all latent elements
    clip_ratio: float = attrs.field(default=1e-4, converter=float, validator=positive_finite)
    #: advantages are clipped to [-adv_clip_max, adv_clip_max] before the objective
    adv_clip_max: float = attrs.field(default=5.0, converter=float, validator=positive_finite)
    #: β of the KL-to-reference term; > 0 makes the update also evaluate the reference (adapters off)
    kl_coef: float = attrs.field(default=0.0, converter=float, validator=non_negative_finite)
    #: tree rollouts (docs/math.md#tree-rollouts): the sampler's ``tree_branching``, so that each window step trains
    #: with its node's advantage (``omni-rl check`` requires the two to match); empty: one advantage per sample
    tree_branching: tuple[int, ...] = attrs.field(default=(), converter=tuple)
    #: how the leaves' rewards become node advantages: "depth" (normalised over each level) or "sibling" (centred
    #: on the parent's value)
    tree_advantage: str = attrs.field(default="depth", validator=attrs.validators.in_(("depth", "sibling")))
    #: eps of the node advantages' std
    tree_eps: float = attrs.field(default=1e-4, converter=float, validator=positive_finite)
