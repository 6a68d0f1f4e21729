"""``awm``: Advantage Weighted Matching, a clipped policy-gradient objective on the flow-matching loss.

For one micro-batch at timestep draw k (docs/math.md#awm-loss; the reference is scxue/advantage_weighted_matching's
``train_sd3_awm.py``):

- t, ε drawn once per sample (:mod:`omni_rl_awm.timesteps`); x_t = (1 − t)·x₀ + t·ε on the rollout's clean x₀
- ℓ = mean_dims (v(x_t, t) − (ε − x₀))² for the current and the old policy, with the *same* t and ε
- log p = −w(ℓ, t) (:mod:`omni_rl_awm.weighting`); ρ = exp(log p_θ − log p_old)
- Â = clip(A, ±adv_clip_max), times advantage_max / adv_clip_max when advantage_max is set
- policy_loss = mean max(−Â·ρ, −Â·clip(ρ, 1 − ε, 1 + ε))
- loss = policy_loss + kl_coef·mean (v_θ − v_ref)² + ema_coef·mean (v_θ − v_ema)²

On-policy (ρ = 1, inside the clip) the gradient is mean_b Â_b·∇w(ℓ_b, t_b): descending it lowers the weighted
matching loss of above-average samples and raises it for below-average ones.

Where this follows the reference trainer rather than the paper's description:

- one ratio per (sample, timestep) draw (its ``loss_type = "exp_first"``, used by all its configs);
- the KL and EMA terms are unweighted mean squared velocity differences (its ``kl_weight = "Uniform"``);
- advantages rescaled to ±advantage_max (its ``advantage_max``) and a clip range of 1 in its configs.

One difference from the reference: it adds the EMA term only when the KL term is on (β > 0); here the two
coefficients are independent (``kl_coef = 0, ema_coef > 0`` adds the EMA term alone).
"""

from __future__ import annotations

from typing import Any

import torch
from omni_rl_flow_grpo.ppo import clipped_policy_loss, ratio_metrics
from torch import Tensor

from omni_rl.batch import ForwardLossInputs, LossOutput
from omni_rl.protocols import LossRequirements
from omni_rl_awm.anchors import EMA_ADAPTER, OLD_ADAPTER, PolicyAnchors
from omni_rl_awm.config import AWMLossConfig
from omni_rl_awm.timesteps import draw_time_and_noise
from omni_rl_awm.weighting import time_weighted_loss


def _per_sample(t: Tensor, batch: int, what: str) -> Tensor:
    """A per-sample value given as (B,), (B, 1, …) or a scalar, as float32 of shape (B,)."""
    t = t.to(torch.float32)
    if t.numel() == 1:
        return t.reshape(1).expand(batch)
    if t.numel() != batch:
        raise ValueError(f"awm: expected one {what} per sample ({batch}), got shape {tuple(t.shape)}")
    return t.reshape(batch)


def _mean_dims(x: Tensor) -> Tensor:
    """Mean over every non-batch dimension: (B, …) → (B,)."""
    return x.reshape(x.shape[0], -1).mean(dim=1)


class AWMLoss:
    """AWM's loss; evaluates the current and old views, the reference when ``kl_coef > 0``, the EMA anchor
    when ``ema_coef > 0``. Owns the old/EMA adapters through the optional loss hooks."""

    def __init__(self, config: AWMLossConfig) -> None:
        self.config = config
        views = {"current", OLD_ADAPTER}
        if config.kl_coef > 0:
            views.add("reference")
        if config.ema_coef > 0:
            views.add(EMA_ADAPTER)
        self.requirements = LossRequirements(inputs="forward", views=frozenset(views), timesteps=config.timesteps)
        self.anchors = PolicyAnchors(config)

    # -- optional hooks (called in the policy worker) ------------------------------------------------------

    def setup(self, model: Any) -> None:
        """Add the "old" (and "ema") adapters as copies of the trained one."""
        self.anchors.setup(model)

    def before_update(self, model: Any, step: int) -> None:
        """Refresh "old" to the rollout policy (and blend "ema") before the step's first optimizer step."""
        self.anchors.before_update(model, step)

    def after_optimizer_step(self, model: Any, update_index: int) -> None:
        self.anchors.after_optimizer_step(model, update_index)

    def checkpoint_state(self) -> dict[str, Any]:
        """The anchors' counters (the core checkpoints the old/EMA adapters' weights itself)."""
        return self.anchors.checkpoint_state()

    def load_checkpoint_state(self, state: dict[str, Any]) -> None:
        self.anchors.load_checkpoint_state(state)

    # -- protocol ------------------------------------------------------------------------------------------

    def prepare(self, rewards: Tensor, advantages: Tensor, group_ids: Tensor) -> dict[str, Tensor]:
        """Nothing to precompute: every sample's advantage is used as it is at every timestep draw."""
        return {}

    def draw(self, inputs: ForwardLossInputs) -> tuple[Tensor, Tensor]:
        """(t, ε) for these samples at this draw, from their generators (one draw serves every view)."""
        x0 = inputs.x0
        return draw_time_and_noise(
            inputs.generators,
            tuple(x0.shape[1:]),
            index=inputs.timestep_index,
            count=self.requirements.timesteps,
            config=self.config,
            device=x0.device,
            sigma_schedule=inputs.sigma_schedule,
        )

    def __call__(self, inputs: ForwardLossInputs) -> LossOutput:
        x0 = inputs.x0.to(torch.float32)
        batch = x0.shape[0]
        if len(inputs.generators) != batch:
            raise ValueError(f"awm: {len(inputs.generators)} generators for {batch} samples")
        t, noise = self.draw(inputs)
        t_b = t.reshape(batch, *([1] * (x0.ndim - 1)))
        x_t = (1.0 - t_b) * x0 + t_b * noise
        target = noise - x0

        velocity = inputs.velocity("current", x_t, t).to(torch.float32)
        ell = _mean_dims((velocity - target) ** 2)
        log_prob = -time_weighted_loss(ell, t, self.config)
        if self.anchors.old_is_current:
            old_log_prob = log_prob.detach()
        else:
            old_velocity = inputs.velocity(OLD_ADAPTER, x_t, t).to(torch.float32).detach()
            old_log_prob = -time_weighted_loss(_mean_dims((old_velocity - target) ** 2), t, self.config)

        advantages = _per_sample(inputs.advantages, batch, "advantage")
        clipped_adv = advantages.clamp(-self.config.adv_clip_max, self.config.adv_clip_max)
        if self.config.advantage_max is not None:
            clipped_adv = clipped_adv * (self.config.advantage_max / self.config.adv_clip_max)
        policy_loss, ratio = clipped_policy_loss(log_prob, old_log_prob, clipped_adv, self.config.clip_ratio)

        loss = policy_loss
        kl = ema_kl = None
        if self.config.kl_coef > 0:
            kl = self._distance(velocity, inputs.velocity("reference", x_t, t))
            loss = loss + self.config.kl_coef * kl
        if self.config.ema_coef > 0:
            ema_kl = self._distance(velocity, inputs.velocity(EMA_ADAPTER, x_t, t))
            loss = loss + self.config.ema_coef * ema_kl

        metrics = self._metrics(ratio, log_prob, old_log_prob, advantages, policy_loss, ell, t, kl, ema_kl)
        return LossOutput(loss=loss, metrics=metrics)

    @staticmethod
    def _distance(velocity: Tensor, anchor: Tensor) -> Tensor:
        """mean_b mean_dims (v_θ − v_anchor)², the anchor detached (the reference's "Uniform" KL weighting)."""
        return _mean_dims((velocity - anchor.to(torch.float32).detach()) ** 2).mean()

    def _metrics(
        self,
        ratio: Tensor,
        log_prob: Tensor,
        old_log_prob: Tensor,
        advantages: Tensor,
        policy_loss: Tensor,
        ell: Tensor,
        t: Tensor,
        kl: Tensor | None,
        ema_kl: Tensor | None,
    ) -> dict[str, Any]:
        """Plain-float diagnostics, named as flow_grpo's where they mean the same (the trainer adds ``actor/``).

        ``matching_loss`` is the unweighted flow-matching error mean ℓ, ``weighted_loss`` the mean w(ℓ, t)
        (= −log p), ``timestep_mean`` the mean drawn t; ``ratio_std`` is the population std;
        ``advantage_abs_mean`` is taken before clipping and rescaling.
        """
        with torch.no_grad():
            metrics: dict[str, Any] = {
                "policy_loss": float(policy_loss.detach()),
                "matching_loss": float(ell.detach().mean()),
                "weighted_loss": float(-log_prob.detach().mean()),
                "timestep_mean": float(t.mean()),
            }
            metrics.update(ratio_metrics(ratio, log_prob, old_log_prob, advantages, self.config.clip_ratio))
            if kl is not None:
                metrics["kl"] = float(kl.detach())
            if ema_kl is not None:
                metrics["ema_kl"] = float(ema_kl.detach())
        return metrics
