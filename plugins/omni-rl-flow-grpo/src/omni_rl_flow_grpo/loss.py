"""``flow_grpo``: clipped PPO on per-step log-probs, with an optional KL to the reference (docs/math.md#flow-grpo-loss).

For one micro-batch at one window step:

- Â = clip(A, ±adv_clip_max); ρ = exp(log π_θ - log π_old)
- policy_loss = mean max(-Â·ρ, -Â·clip(ρ, 1 - ε, 1 + ε))
- kl = mean_b [ mean_dims (μ_θ - μ_ref)² / (2 s²) ], s = the current step's std_dev_t (without sqrt(-dt))
- loss = policy_loss + kl_coef · kl
- with rollout correction weights w (``TrajectoryLossInputs.weights``): policy_loss = mean w·max(…)

As the reference trainer (flow_grpo's ``train_sd3*.py``) does it: the KL is a squared distance of the two
means scaled by s², not the Gaussian KL with the sqrt(-dt) factor; the clip fractions count |ρ - 1| > ε.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from omni_rl.batch import LossOutput, TrajectoryLossInputs
from omni_rl.protocols import LossRequirements
from omni_rl_flow_grpo.config import FlowGRPOLossConfig
from omni_rl_flow_grpo.kl import with_reference_kl
from omni_rl_flow_grpo.loss_inputs import log_prob_of, per_sample, weighted
from omni_rl_flow_grpo.per_step import per_step_means
from omni_rl_flow_grpo.ppo import clipped_objective, ratio_metrics
from omni_rl_flow_grpo.tree import TREE_KEY, column_advantages, tree_advantages


def _per_sample(t: Tensor, batch: int) -> Tensor:
    """A per-sample value given as (B,), (B, 1, …, 1) or a scalar, as float32 of shape (B,)."""
    return per_sample(t, batch, "flow_grpo")


class FlowGRPOLoss:
    """Flow-GRPO's policy loss; needs the current view, plus the reference view when ``kl_coef > 0``."""

    def __init__(self, config: FlowGRPOLossConfig) -> None:
        self.config = config
        views = {"current"} | ({"reference"} if config.kl_coef > 0 else set())
        self.requirements = LossRequirements(inputs="trajectory", views=frozenset(views), sample_weights=True)

    def prepare(self, rewards: Tensor, advantages: Tensor, group_ids: Tensor) -> dict[str, Tensor]:
        """Tree rollouts: each sample's step-level advantages (N, D) from the leaves' rewards; otherwise nothing
        (the advantages are used as they are at every trained step)."""
        if not self.config.tree_branching:
            return {}
        mode, eps = self.config.tree_advantage, self.config.tree_eps
        return {TREE_KEY: tree_advantages(rewards, group_ids, self.config.tree_branching, mode, eps)}

    def __call__(self, inputs: TrajectoryLossInputs) -> LossOutput:
        current = inputs.current
        log_prob = log_prob_of(current, "flow_grpo")
        batch = log_prob.shape[0]
        old_log_prob = _per_sample(inputs.old_log_prob, batch)
        advantages = _per_sample(column_advantages(inputs.advantages, inputs.extras, inputs.window_position), batch)

        clipped_adv = advantages.clamp(-self.config.adv_clip_max, self.config.adv_clip_max)
        ratio = torch.exp(log_prob - old_log_prob)
        terms = clipped_objective(ratio, clipped_adv, self.config.clip_ratio)
        # rollout correction's per-sample weights when given (rejected ones, weight 0, kept in the mean)
        policy_loss = weighted(terms, inputs.weights, "flow_grpo").mean()

        loss, kl = with_reference_kl(policy_loss, current, inputs.reference, self.config.kl_coef, batch, "flow_grpo")

        metrics = self._metrics(ratio, log_prob, old_log_prob, advantages, policy_loss, kl)
        step_metrics, step_counts = per_step_means("ratio_mean", ratio, inputs.step_indices)
        metrics.update(step_metrics)
        return LossOutput(loss=loss, metrics=metrics, metric_counts=step_counts)

    def _metrics(
        self,
        ratio: Tensor,
        log_prob: Tensor,
        old_log_prob: Tensor,
        advantages: Tensor,
        policy_loss: Tensor,
        kl: Tensor | None,
    ) -> dict[str, Any]:
        """Plain-float diagnostics (the trainer prefixes them with ``actor/``): the PPO ones of
        :func:`~omni_rl_flow_grpo.ppo.ratio_metrics`, the policy loss and the KL when it is on. The caller adds
        ``ratio_mean/step_<j>``, the ratio's mean over the samples at schedule step j (GRPO-Guard's diagnostic)."""
        metrics: dict[str, Any] = {"policy_loss": float(policy_loss.detach())}
        metrics.update(ratio_metrics(ratio, log_prob, old_log_prob, advantages, self.config.clip_ratio))
        if kl is not None:
            metrics["kl"] = float(kl.detach())
        return metrics
