"""``grpo_guard``: Flow-GRPO's clipped PPO on GRPO-Guard's normalised ratio, reweighted per step
(docs/math.md#grpo-guard-loss).

For one micro-batch at one window column (each sample i at its own schedule step):

- Â = clip(A, ±adv_clip_max); c_i = the std of x' given x (``SamplerStep.scale``); μ_old from the ``old`` view
- b_i = mean_dims(μ_θ − μ_old)²/(2c_i²); ρ_i = exp((log π_θ − log π_old + b_i)·c_i)   (:mod:`.ratio_norm`)
- policy_loss = mean_i w_i·max(−Â_i ρ_i, −Â_i clip(ρ_i, 1 ± ε)), w_i = 1/(σ_i − σ'_i) (1 without ``step_reweight``)
- loss = policy_loss + kl_coef · kl, the KL to the reference of ``flow_grpo`` (:mod:`omni_rl_flow_grpo.kl`)

Metrics (the trainer prefixes ``actor/``): ``ratio_mean``/``ratio_std`` and the clip fractions of the normalised
ratio, ``ratio_mean_raw``/``ratio_std_raw`` of exp(log π_θ − log π_old), both per step as ``ratio_mean/step_<j>``
and ``ratio_mean_raw/step_<j>``, ``ratio_bias`` (mean b), ``ppo_kl`` = mean(log π_old − log π_θ),
``policy_loss`` and ``kl``.
"""

from __future__ import annotations

from typing import Any

import torch
from omni_rl_flow_grpo.kl import with_reference_kl
from omni_rl_flow_grpo.loss_inputs import f32, log_prob_of, per_sample, require_old, require_scale, weighted
from omni_rl_flow_grpo.per_step import per_step_means
from omni_rl_flow_grpo.ppo import clipped_objective, ratio_metrics
from torch import Tensor

from omni_rl.batch import LossOutput, TrajectoryLossInputs
from omni_rl.protocols import LossRequirements
from omni_rl_grpo_guard.config import GRPOGuardLossConfig
from omni_rl_grpo_guard.ratio_norm import NormalisedRatio, ratio_norm, step_weights

NAME = "grpo_guard"


class GRPOGuardLoss:
    """GRPO-Guard's policy loss; needs the current and old views, plus the reference when ``kl_coef > 0``."""

    def __init__(self, config: GRPOGuardLossConfig) -> None:
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
        old_mean = f32(require_old(inputs.old, NAME, needed_for="RatioNorm needs the old policy's mean μ_old").mean)
        scale = require_scale(
            current,
            batch,
            NAME,
            needed_for="RatioNorm's c and b need",
            fix="use a sampler with a Gaussian log-prob that sets it, such as flow_sde",
        )
        norm = ratio_norm(log_prob, old_log_prob, f32(current.mean), old_mean, scale)
        advantages = per_sample(inputs.advantages, batch, NAME)
        clipped_adv = advantages.clamp(-self.config.adv_clip_max, self.config.adv_clip_max)
        terms = clipped_objective(norm.ratio, clipped_adv, self.config.clip_ratio)
        if self.config.step_reweight:
            terms = terms * step_weights(*self._sigmas(inputs, batch))
        policy_loss = weighted(terms, inputs.weights, NAME).mean()  # rollout correction's weights, when given

        loss, kl = with_reference_kl(policy_loss, current, inputs.reference, self.config.kl_coef, batch, NAME)
        metrics, counts = self._metrics(norm, log_prob, old_log_prob, advantages, policy_loss, kl, inputs.step_indices)
        return LossOutput(loss=loss, metrics=metrics, metric_counts=counts)

    @staticmethod
    def _sigmas(inputs: TrajectoryLossInputs, batch: int) -> tuple[Tensor, Tensor]:
        if inputs.sigmas is None or inputs.next_sigmas is None:
            raise ValueError(
                f"{NAME}: step_reweight needs each sample's sigma and next sigma (TrajectoryLossInputs.sigmas, "
                ".next_sigmas); pass them, or set step_reweight = false"
            )
        return per_sample(inputs.sigmas, batch, NAME), per_sample(inputs.next_sigmas, batch, NAME)

    @torch.no_grad()
    def _metrics(
        self,
        norm: NormalisedRatio,
        log_prob: Tensor,
        old_log_prob: Tensor,
        advantages: Tensor,
        policy_loss: Tensor,
        kl: Tensor | None,
        step_indices: Tensor | None,
    ) -> tuple[dict[str, Any], dict[str, int]]:
        """Plain floats and the per-step metrics' sample counts (see the module docstring)."""
        ratio = norm.ratio.detach()
        raw = torch.exp(norm.log_ratio.detach())
        metrics: dict[str, Any] = {"policy_loss": float(policy_loss.detach())}
        # ratio_mean / ratio_std / clip fractions of the normalised ratio; ppo_kl, approx_kl of the raw log-ratio
        metrics.update(ratio_metrics(ratio, log_prob, old_log_prob, advantages, self.config.clip_ratio))
        metrics["ratio_mean_raw"] = float(raw.mean())
        metrics["ratio_std_raw"] = float(raw.std(correction=0))
        metrics["ratio_bias"] = float(norm.bias.detach().mean())
        if kl is not None:
            metrics["kl"] = float(kl.detach())
        counts: dict[str, int] = {}
        for name, values in (("ratio_mean", ratio), ("ratio_mean_raw", raw)):
            step_metrics, step_counts = per_step_means(name, values, step_indices)
            metrics.update(step_metrics)
            counts.update(step_counts)
        return metrics, counts
