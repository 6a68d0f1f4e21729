"""``dgpo``: Group-level DPO (arXiv 2510.08425) in flow form (docs/math.md#dgpo-loss).

DPO uses two samples of a group and one bit of preference; DGPO uses all G samples with their advantages. For a
group with advantages A_i (the ``grpo`` estimator's, which sum to zero in a group), one (t, ε) shared by the group:

- Δ_i = e_θ,i - e_ref,i (the flow-matching errors of :mod:`omni_rl_dpo.loss`)
- w_i = A_i / (Σ_j |A_j| / 2): the better half's weights sum to +1, the worse half's to -1
- inside_g = -(β/2)·Σ_i w_i·Δ_i,   L = mean_groups [-log σ(inside_g)] (+ λ_SFT·Σ_{w_i > 0} w_i·e_θ,i)

A group of two with advantages ±a is then exactly a DPO pair (w = ±1). The gradient is
σ(-inside_g)·(β/2)·Σ_i w_i ∇e_θ,i: every sample's flow-matching loss, weighted by its advantage and by one
group scalar. Whole groups go into one micro-batch (``batch_unit = "group"``). The reference is frozen (LoRA off;
the authors' β 100), a fast EMA adapter (β 2000) or a synced adapter the rollout samples from.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from omni_rl.batch import ForwardLossInputs, LossOutput
from omni_rl.errors import RuntimeFailure
from omni_rl.protocols import LossRequirements
from omni_rl_dpo.config import DGPOLossConfig
from omni_rl_dpo.loss import pair_errors, zero_loss
from omni_rl_dpo.reference import ReferencePolicy

WEIGHT = "dgpo_weight"
SCALE = "dgpo_scale"
GROUPS = "dgpo_groups"
GROUPS_SKIPPED = "dgpo_groups_skipped"
METRICS = (
    "implicit_acc",
    "reward_margin",
    "policy_mse",
    "reference_mse",
    "chosen_error_delta",
    "rejected_error_delta",
    "velocity_norm_ratio",
)


def group_weights(advantages: Tensor, group_ids: Tensor, *, min_spread: float) -> dict[str, Tensor]:
    """Per-sample extras: w_i, N / G on the members of the G groups kept (0 elsewhere), and the two counts.

    A group whose Σ|A| is not above ``min_spread`` carries no preference: its weights are 0 and it is counted as
    skipped. N / G, summed over a micro-batch's groups and divided by its sample count B, makes the step's loss
    the exact mean over the kept groups however the groups fall into micro-batches (as ``pairing``'s N / P)."""
    values = advantages.detach().to(torch.float64).reshape(-1)
    if not bool(torch.isfinite(values).all()):
        raise RuntimeFailure(
            "dgpo: an advantage is NaN or infinite",
            hint='check the reward models; [[reward]] on_error = "zero" scores a failing batch 0',
        )
    n = values.shape[0]
    weight = torch.zeros(n, dtype=torch.float32)
    kept = torch.zeros(n, dtype=torch.bool)
    members: dict[int, list[int]] = {}
    for position, gid in enumerate(group_ids.reshape(-1).tolist()):
        members.setdefault(int(gid), []).append(position)
    groups = skipped = 0
    for positions in members.values():
        total = float(values[positions].abs().sum())
        if not total > min_spread:
            skipped += 1
            continue
        groups += 1
        weight[positions] = (values[positions] / (total / 2)).float()
        kept[positions] = True
    scale = torch.where(kept, torch.tensor(n / groups if groups else 0.0), torch.tensor(0.0))
    return {
        WEIGHT: weight,
        SCALE: scale.float(),
        GROUPS: torch.full((n,), float(groups)),
        GROUPS_SKIPPED: torch.full((n,), float(skipped)),
    }


class DGPOLoss:
    """Group-level DPO on every sample of a group; the current policy with gradients, the reference without."""

    def __init__(self, config: DGPOLossConfig) -> None:
        self.config = config
        self.reference = ReferencePolicy(
            config.reference,
            sync_every=config.reference_sync_every,
            ema_decay=config.reference_ema_decay,
            loss_name="dgpo",
        )
        self.requirements = LossRequirements(
            inputs="forward",
            views=frozenset({"current", self.reference.view}),
            timesteps=config.timesteps,
            batch_unit="group",
            rollout_view=self.reference.rollout_view,  # type: ignore[arg-type]
        )

    def setup(self, model: Any) -> None:
        self.reference.setup(model)

    def before_update(self, model: Any, step: int) -> None:
        self.reference.before_update(model, step)

    def after_update(self, model: Any, update_index: int) -> None:
        self.reference.after_update(model)

    def prepare(self, rewards: Tensor, advantages: Tensor, group_ids: Tensor) -> dict[str, Tensor]:
        return group_weights(advantages, group_ids, min_spread=self.config.min_advantage_spread)

    def __call__(self, inputs: ForwardLossInputs) -> LossOutput:
        cfg = self.config
        extras = inputs.extras
        if WEIGHT not in extras:
            raise RuntimeFailure(
                "dgpo: the batch has no group weights (the dgpo_weight extra is missing)",
                hint="pass extras=loss.prepare(rewards, advantages, group_ids) when calling the loss directly",
            )
        batch = inputs.x0.shape[0]
        counts = {"groups": float(extras[GROUPS][0]), "groups_skipped": float(extras[GROUPS_SKIPPED][0])}
        names = [*METRICS, *(["sft_mse"] if cfg.sft_weight > 0 else [])]
        kept = torch.nonzero(extras[SCALE] > 0).flatten().tolist()
        if not kept:
            return zero_loss(inputs, self.reference.view, names, counts)
        members: dict[int, list[int]] = {}
        for position in kept:
            members.setdefault(int(inputs.group_ids[position]), []).append(position)
        samples = [p for positions in members.values() for p in positions]
        first = [positions[0] for positions in members.values()]
        draw_of = [g for g, positions in enumerate(members.values()) for _ in positions]
        device = inputs.x0.device
        as_index = lambda values: torch.as_tensor(values, dtype=torch.long, device=device)  # noqa: E731
        view = self.reference.view
        errors = pair_errors(inputs, as_index(samples), as_index(first), as_index(draw_of), cfg, view=view)

        w = extras[WEIGHT][samples].float().to(errors.e_theta.device)
        group = as_index(draw_of).to(errors.e_theta.device)
        count = len(members)

        def per_group(values: Tensor) -> Tensor:
            return torch.zeros(count, device=values.device, dtype=values.dtype).index_add(0, group, values)

        delta = errors.e_theta - errors.e_ref
        inside = -0.5 * cfg.beta * per_group(w * delta)
        per = -F.logsigmoid(inside)
        positive = w.clamp(min=0.0)
        if cfg.sft_weight > 0:
            per = per + cfg.sft_weight * per_group(positive * errors.e_theta)
        scale = extras[SCALE][first].float().to(per.device) / batch
        loss = (scale * per).sum()
        with torch.no_grad():
            size = per_group(torch.ones_like(w))
            negative = (-w).clamp(min=0.0)
            metrics: dict[str, Any] = {
                "implicit_acc": float((scale * (inside > 0).float()).sum()),
                "reward_margin": float((scale * inside).sum()),
                "policy_mse": float((scale * per_group(errors.e_theta) / size).sum()),
                "reference_mse": float((scale * per_group(errors.e_ref) / size).sum()),
                "chosen_error_delta": float((scale * per_group(positive * delta)).sum()),
                "rejected_error_delta": float((scale * per_group(negative * delta)).sum()),
                "velocity_norm_ratio": float((scale * per_group(errors.norm_ratio) / size).sum()),
                **counts,
            }
            if cfg.sft_weight > 0:
                metrics["sft_mse"] = float((scale * per_group(positive * errors.e_theta)).sum())
        return LossOutput(loss=loss, metrics=metrics)
