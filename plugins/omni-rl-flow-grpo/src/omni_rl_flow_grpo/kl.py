"""The KL-to-reference term of the policy-gradient losses (docs/math.md#kl-to-the-reference), shared by
``flow_grpo``, ``grpo_guard`` and ``flow_dppo`` so all three regularise identically:

    kl = mean_b [ mean_dims (μ_θ - μ_ref)² / (2 s²) ],  s = the current step's ``std_dev_t``

``std_dev_t`` is the sampler's noise scale *without* the sqrt(-dt) factor for flow_sde, as flow_grpo's reference
trainers (``train_sd3*.py``) compute it: a squared distance of the two means scaled by s², not the Gaussian KL
between the two transition densities (that one, with the actual std, is Flow-DPPO's trust-region KL).
"""

from __future__ import annotations

from torch import Tensor

from omni_rl.batch import SamplerStep
from omni_rl_flow_grpo.loss_inputs import f32, per_sample


def reference_kl(current: SamplerStep, reference: SamplerStep | None, batch: int, loss_name: str) -> Tensor:
    """The batch mean of mean_dims (μ_θ - μ_ref)² / (2 s²); the gradient reaches μ_θ only."""
    if reference is None:
        raise ValueError(
            f"{loss_name}: kl_coef > 0 but no reference view was given; the update must evaluate the "
            "views in loss.requirements.views"
        )
    diff = f32(current.mean) - f32(reference.mean).detach()
    sq = (diff**2).reshape(batch, -1).mean(dim=1)
    std = per_sample(current.std_dev_t, batch, loss_name)
    return (sq / (2 * std**2)).mean()


def with_reference_kl(
    policy_loss: Tensor,
    current: SamplerStep,
    reference: SamplerStep | None,
    kl_coef: float,
    batch: int,
    loss_name: str,
) -> tuple[Tensor, Tensor | None]:
    """``(policy_loss + kl_coef · kl, kl)``, or ``(policy_loss, None)`` when ``kl_coef`` is 0: the tail every loss of
    the family ends with, so the KL term is added (and reported) the same way by each."""
    if kl_coef <= 0:
        return policy_loss, None
    kl = reference_kl(current, reference, batch, loss_name)
    return policy_loss + kl_coef * kl, kl
