"""The step's advantages from its scored rewards, with several ``[[reward]]`` sections combined one of two ways
(docs/math.md#multi-reward-aggregation):

- ``"reward"`` (Flow-GRPO; the default): the estimator normalises the weighted sum r = Σ_k w_k r_k.
- ``"advantage"`` (MixGRPO's ``advantage_aggr``, DanceGRPO's multi-reward training): the estimator normalises each
  r_k alone and the step uses Σ_k w_k A_k, so a reward with a small spread is not drowned by one with a large
  spread (each A_k has unit scale before weighting).

The estimator says which through its optional ``reward_aggregation()`` member (docs/hooks.md), so the core reads no
plugin's options. With two rewards or more, each reward's own advantage A_k is logged either way
(``advantage/<name>/abs_mean`` and ``/std``): it shows which reward drives the update.
"""

from __future__ import annotations

from typing import Any

import attrs

from omni_rl.errors import RuntimeFailure
from omni_rl.rewards.combined import ScoredBatch

#: the values ``reward_aggregation()`` may return
AGGREGATIONS: tuple[str, ...] = ("reward", "advantage")


def reward_aggregation(estimator: Any) -> str:
    """``"reward"`` or ``"advantage"``: the estimator's ``reward_aggregation()``, ``"reward"`` without that member."""
    member = getattr(estimator, "reward_aggregation", None)
    mode = "reward" if member is None else member()
    if mode not in AGGREGATIONS:
        raise RuntimeFailure(
            f"the advantage estimator's reward_aggregation() returned {mode!r}; it must return one of {AGGREGATIONS}",
            hint="fix the advantage plugin (docs/hooks.md, omni_rl_advantage_estimators)",
        )
    return mode


@attrs.define
class StepAdvantages:
    """The advantage of every sample (float32, (N,)) and, with several rewards, each reward's own A_k."""

    total: Any
    per_reward: dict[str, Any] = attrs.field(factory=dict)

    def metrics(self) -> dict[str, float]:
        """``advantage/<name>/abs_mean`` and ``advantage/<name>/std`` (population) of each A_k, when 2+ rewards."""
        if len(self.per_reward) < 2:
            return {}
        out = {}
        for name, adv in self.per_reward.items():
            out[f"advantage/{name}/abs_mean"] = float(adv.abs().mean())
            out[f"advantage/{name}/std"] = float(adv.double().std(correction=0)) if adv.numel() else 0.0
        return out


def finite_only(estimator: Any, rewards: Any, group_ids: Any) -> Any:
    """``estimator(rewards, group_ids)`` over the samples with a finite reward; the others (a reward's NaN/inf,
    counted in ``reward/<name>/nonfinite``) get advantage 0: no signal, and no effect on their group's mean/std.
    With every reward finite this is the estimator's own call, unchanged."""
    import torch

    finite = torch.isfinite(rewards)
    if bool(finite.all()):
        return torch.as_tensor(estimator(rewards, group_ids))
    out = torch.zeros(rewards.shape, dtype=torch.float32)
    if bool(finite.any()):
        groups = torch.as_tensor(group_ids)
        out[finite] = torch.as_tensor(estimator(rewards[finite], groups[finite])).to(torch.float32).cpu()
    return out


def neutral_nonfinite(total: Any, group_ids: Any) -> Any:
    """``total`` (numpy) with each non-finite entry replaced by its group's finite mean (0 when none): what the
    loss sees of a NaN/inf reward, so that the sample carries no signal there either."""
    import numpy as np

    finite = np.isfinite(total)
    if finite.all():
        return total
    out = np.array(total, dtype=np.float64)
    groups = np.asarray(group_ids)
    for i in np.flatnonzero(~finite):
        same = finite & (groups == groups[i])
        out[i] = total[same].mean() if same.any() else 0.0
    return out


def compute_advantages(estimator: Any, scored: ScoredBatch, group_ids: Any) -> StepAdvantages:
    """Advantages of one step: ``estimator(Σ_k w_k r_k)``, or Σ_k w_k·estimator(r_k) (see the module docstring).

    The weighted-reward path makes exactly the call the trainer always made (float32 rewards of
    ``scored.total``), first, so its result does not change; the per-reward calls for logging come after it.
    """
    import torch

    mode = reward_aggregation(estimator)
    total = None
    if mode == "reward":
        total = finite_only(estimator, torch.as_tensor(scored.total, dtype=torch.float32), group_ids)
    per_reward: dict[str, Any] = {}
    if mode == "advantage" or len(scored.scores) >= 2:
        for name, score in scored.scores.items():
            adv = finite_only(estimator, torch.as_tensor(score, dtype=torch.float32), group_ids)
            per_reward[name] = torch.as_tensor(adv).to(torch.float32)
    if mode == "advantage":
        missing = [name for name in per_reward if name not in scored.weights]
        if missing:
            raise RuntimeFailure(
                f"advantage aggregation needs each reward's weight, and the scored batch has none for {missing}",
                hint="score with omni_rl.rewards.combined.CombinedReward, which records the [[reward]] weights",
            )
        summed = torch.zeros(len(scored.total), dtype=torch.float64)
        for name, adv in per_reward.items():
            summed += scored.weights[name] * adv.double().cpu()
        total = summed.to(torch.float32)
    assert total is not None
    return StepAdvantages(total=total, per_reward=per_reward)
