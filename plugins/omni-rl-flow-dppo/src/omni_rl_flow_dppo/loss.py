"""``flow_dppo``: Flow-GRPO's per-step ratio without a clip, inside Flow-DPPO's KL trust region
(docs/math.md#flow-dppo-loss).

For one micro-batch at one window column:

- ρ = exp(log π_θ − log π_old) as in flow_grpo; A used as it is (not clipped)
- KL_new,old and the drop mask of :mod:`.trust_region` (KL ≥ kl_mask_threshold and moving further away)
- policy_loss = mean(kept ? −A·ρ : 0) (dropped steps stay in the mean's denominator, as UniRL's reference)
- loss = policy_loss + kl_coef · kl, the KL to the reference of ``flow_grpo`` (:mod:`omni_rl_flow_grpo.kl`)

A dropped step is selected away (``torch.where``, on its log-ratio before exp too), not multiplied by 0, so an
overflowing ρ there cannot turn the loss or its gradient into NaN.

Metrics (the trainer prefixes ``actor/``): ``dppo_masked_fraction``, ``ratio_mean``, ``ratio_std``,
``ratio_mean/step_<j>``, ``kl_new_old`` (mean), ``ppo_kl`` = mean(log π_old − log π_θ), ``policy_loss`` and ``kl``.
"""

from __future__ import annotations

from typing import Any

import torch
from omni_rl_flow_grpo.kl import with_reference_kl
from omni_rl_flow_grpo.loss_inputs import f32, log_prob_of, per_sample, require_old, require_scale, weighted
from omni_rl_flow_grpo.per_step import per_step_means
from torch import Tensor

from omni_rl.batch import LossOutput, TrajectoryLossInputs
from omni_rl.protocols import LossRequirements
from omni_rl_flow_dppo.config import FlowDPPOLossConfig
from omni_rl_flow_dppo.trust_region import TrustRegion, trust_region

NAME = "flow_dppo"


class FlowDPPOLoss:
    """Flow-DPPO's policy loss; needs the current and old views, plus the reference when ``kl_coef > 0``."""

    def __init__(self, config: FlowDPPOLossConfig) -> None:
        self.config = config
        views = {"current", "old"} | ({"reference"} if config.kl_coef > 0 else set())
        self.requirements = LossRequirements(inputs="trajectory", views=frozenset(views), sample_weights=True)

    def prepare(self, rewards: Tensor, advantages: Tensor, group_ids: Tensor) -> dict[str, Tensor]:
        """Nothing to precompute: the advantages are used as they are at every trained step."""
        return {}

    def __call__(self, inputs: TrajectoryLossInputs) -> LossOutput:
        current = inputs.current
        log_prob = log_prob_of(current, NAME)
        batch = log_prob.shape[0]
        old_log_prob = per_sample(inputs.old_log_prob, batch, NAME)
        advantages = per_sample(inputs.advantages, batch, NAME)
        ratio = torch.exp(log_prob - old_log_prob).detach()  # for the mask and the metrics
        old = require_old(inputs.old, NAME, needed_for="the trust region's KL needs the old policy's mean μ_old")
        scale = require_scale(
            current,
            batch,
            NAME,
            needed_for="the trust region's KL between the old and new Gaussian steps needs",
            fix="use flow_sde or cps",
        )
        region = trust_region(f32(current.mean), f32(old.mean), scale, ratio, advantages, self.config.kl_mask_threshold)
        # the dropped steps' log-ratio is replaced before exp: an overflowing ρ there would give 0·inf = NaN in the
        # backward of a torch.where on the loss term itself
        log_ratio = torch.where(region.dropped, torch.zeros_like(log_prob), log_prob - old_log_prob)
        kept_terms = weighted(-advantages * torch.exp(log_ratio), inputs.weights, NAME)  # rollout correction
        policy_loss = torch.where(region.dropped, torch.zeros_like(kept_terms), kept_terms).mean()

        loss, kl = with_reference_kl(policy_loss, current, inputs.reference, self.config.kl_coef, batch, NAME)
        metrics, counts = self._metrics(ratio, log_prob, old_log_prob, region, policy_loss, kl, inputs.step_indices)
        return LossOutput(loss=loss, metrics=metrics, metric_counts=counts)

    @torch.no_grad()
    def _metrics(
        self,
        ratio: Tensor,
        log_prob: Tensor,
        old_log_prob: Tensor,
        region: TrustRegion,
        policy_loss: Tensor,
        kl: Tensor | None,
        step_indices: Tensor | None,
    ) -> tuple[dict[str, Any], dict[str, int]]:
        """Plain floats and the per-step metrics' sample counts (see the module docstring)."""
        ratio = ratio.detach()
        metrics: dict[str, Any] = {
            "policy_loss": float(policy_loss.detach()),
            "dppo_masked_fraction": float(region.dropped.float().mean()),
            "kl_new_old": float(region.kl.mean()),
            "ratio_mean": float(ratio.mean()),
            "ratio_std": float(ratio.std(correction=0)),
            "ppo_kl": float((old_log_prob.detach() - log_prob.detach()).mean()),
        }
        if kl is not None:
            metrics["kl"] = float(kl.detach())
        step_metrics, counts = per_step_means("ratio_mean", ratio, step_indices)
        metrics.update(step_metrics)
        return metrics, counts
