"""``elbo_pg`` and ``v_grpo``: policy gradients on the ELBO of the finished sample (docs/math.md#elbo-likelihood).

One class serves both (they share the ELBO and differ in the objective around it); per micro-batch:

- K (t, ε) pairs per sample (:func:`omni_rl_awm.elbo.draw_pairs`; group-shared for ``v_grpo`` by default), all in
  one velocity call of B·K rows, so the ELBO of the whole generation is one number per sample;
- ``elbo_pg`` with ``objective = "epg"``: L = −mean_b Â_b·ELBO_θ,b (no old policy: one forward);
- ``elbo_pg`` with ``"pepg"`` and ``v_grpo``: ρ_b = exp(ELBO_θ,b − ELBO_old,b) and the clipped objective
  (:func:`omni_rl_flow_grpo.ppo.clipped_policy_loss`); ``v_grpo`` adds the adaptive weighting λ, the soft advantage
  clip c·tanh(A/c) and the KL to the reference at the same (t, ε).

The old policy is AWM's ``"old"`` adapter (:class:`omni_rl_awm.anchors.PolicyAnchors`): refreshed to the rollout
policy at the start of each update; until the first optimizer step the loss takes ELBO_old from the current
forward, detached, so the first ratio is exactly 1.
"""

from __future__ import annotations

from typing import Any

import torch
from omni_rl_flow_grpo.ppo import clipped_policy_loss, ratio_metrics
from torch import Tensor

from omni_rl.batch import ForwardLossInputs, LossOutput
from omni_rl.protocols import LossRequirements
from omni_rl_awm.anchors import OLD_ADAPTER, PolicyAnchors
from omni_rl_awm.elbo import (
    draw_options,
    draw_pairs,
    elbo_from_errors,
    group_draw_scale,
    group_first_rows,
    matching_errors,
    noised,
)
from omni_rl_awm.elbo_config import ELBOPGLossConfig, VGRPOLossConfig


def _per_sample(value: Tensor, batch: int, name: str) -> Tensor:
    value = torch.as_tensor(value).to(torch.float32)
    if value.numel() == 1:
        return value.reshape(1).expand(batch)
    if value.numel() != batch:
        raise ValueError(f"{name}: expected one advantage per sample ({batch}), got shape {tuple(value.shape)}")
    return value.reshape(batch)


class ELBOPolicyLoss:
    """The ``elbo_pg`` or ``v_grpo`` loss, by the type of its config."""

    def __init__(self, config: ELBOPGLossConfig | VGRPOLossConfig) -> None:
        self.config = config
        self.name = "v_grpo" if isinstance(config, VGRPOLossConfig) else "elbo_pg"
        self.options = draw_options(config)
        self.uses_ratio = isinstance(config, VGRPOLossConfig) or config.objective == "pepg"
        self.group_shared = isinstance(config, VGRPOLossConfig) and config.group_shared_draws
        self.adaptive = isinstance(config, VGRPOLossConfig) and config.adaptive_weighting
        self.kl_coef = config.kl_coef if isinstance(config, VGRPOLossConfig) else 0.0
        self.soft_clip = config.adv_soft_clip if isinstance(config, VGRPOLossConfig) else 0.0
        views = {"current"} | ({OLD_ADAPTER} if self.uses_ratio else set())
        if self.kl_coef > 0:
            views.add("reference")
        # group-relative weighting and shared draws need a group's samples in one call
        unit = "group" if (self.group_shared or self.adaptive) else "sample"
        self.requirements = LossRequirements(inputs="forward", views=frozenset(views), timesteps=1, batch_unit=unit)
        self.anchors = PolicyAnchors(self.options) if self.uses_ratio else None

    # -- optional hooks (the old adapter, only when there is a ratio) -------------------------------------

    def setup(self, model: Any) -> None:
        if self.anchors is not None:
            self.anchors.setup(model)

    def before_update(self, model: Any, step: int) -> None:
        if self.anchors is not None:
            self.anchors.before_update(model, step)

    def after_optimizer_step(self, model: Any, update_index: int) -> None:
        if self.anchors is not None:
            self.anchors.after_optimizer_step(model, update_index)

    # -- protocol ------------------------------------------------------------------------------------------

    def prepare(self, rewards: Tensor, advantages: Tensor, group_ids: Tensor) -> dict[str, Tensor]:
        return {}

    def advantages(self, inputs: ForwardLossInputs, batch: int) -> tuple[Tensor, Tensor]:
        """(raw A, Â): hard-clipped at adv_clip_max, or soft-clipped c·tanh(A / c) when c = adv_soft_clip > 0."""
        raw = _per_sample(inputs.advantages, batch, self.name).to(inputs.x0.device)
        if self.soft_clip > 0:
            return raw, self.soft_clip * torch.tanh(raw / self.soft_clip)
        return raw, raw.clamp(-self.config.adv_clip_max, self.config.adv_clip_max)

    def draw(self, inputs: ForwardLossInputs) -> tuple[Tensor, Tensor]:
        """(t (B, K), ε (B, K, …)) of these samples, shared within each group when ``group_shared_draws``."""
        x0 = inputs.x0
        share = group_first_rows(inputs.group_ids) if self.group_shared else None
        return draw_pairs(
            inputs.generators,
            tuple(x0.shape[1:]),
            draws=self.config.draws,
            options=self.options,
            stratified=self.config.stratified,
            device=x0.device,
            sigma_schedule=inputs.sigma_schedule,
            share_rows=share,
        )

    def __call__(self, inputs: ForwardLossInputs) -> LossOutput:
        x0 = inputs.x0.to(torch.float32)
        batch = x0.shape[0]
        if len(inputs.generators) != batch:
            raise ValueError(f"{self.name}: {len(inputs.generators)} generators for {batch} samples")
        t, noise = self.draw(inputs)
        x_t, t_flat, target, rows = noised(x0, t, noise)
        velocity = inputs.velocity("current", x_t, t_flat, rows).to(torch.float32)
        ell = matching_errors(velocity, target, batch)

        old_ell = None
        if self.uses_ratio:
            if self.anchors is not None and self.anchors.old_is_current:
                old_ell = ell.detach()
            else:
                old_velocity = inputs.velocity(OLD_ADAPTER, x_t, t_flat, rows).to(torch.float32).detach()
                old_ell = matching_errors(old_velocity, target, batch)
        scale = None
        if self.adaptive:
            scale = group_draw_scale(old_ell if old_ell is not None else ell, inputs.group_ids)
        elbo = elbo_from_errors(ell, t, self.options, scale)
        raw_adv, adv = self.advantages(inputs, batch)

        metrics: dict[str, Any] = {"elbo": float(elbo.detach().mean()), "matching_loss": float(ell.detach().mean())}
        if self.uses_ratio:
            assert old_ell is not None
            old_elbo = elbo_from_errors(old_ell, t, self.options, scale).detach()
            policy_loss, ratio = clipped_policy_loss(elbo, old_elbo, adv, self.config.clip_ratio)
            metrics.update(ratio_metrics(ratio, elbo, old_elbo, raw_adv, self.config.clip_ratio))
        else:
            policy_loss = -(adv * elbo).mean()
            metrics["advantage_abs_mean"] = float(raw_adv.abs().mean())
        loss = policy_loss
        if self.kl_coef > 0:
            reference = inputs.velocity("reference", x_t, t_flat, rows).to(torch.float32).detach()
            diff = velocity - reference
            kl = (diff * diff).reshape(diff.shape[0], -1).mean(dim=1).mean()
            loss = loss + self.kl_coef * kl
            metrics["kl"] = float(kl.detach())
        metrics["policy_loss"] = float(policy_loss.detach())
        metrics["timestep_mean"] = float(t.mean())
        return LossOutput(loss=loss, metrics=metrics)
