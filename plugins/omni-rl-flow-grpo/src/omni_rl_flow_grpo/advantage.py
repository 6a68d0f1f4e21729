"""``grpo``: group-normalised advantages (docs/math.md#grpo-advantages).

A_i = (r_i - mean_{g(i)} r) / (std + eps), with std over the whole batch (``global_std``) or within i's
group; without std normalisation (Dr.GRPO) A_i = r_i - mean_{g(i)} r. A group of one is its own mean, so
its advantage is 0.

Matches the reference's ``PerPromptStatTracker`` (flow_grpo): statistics in float64 (it uses numpy on
float64 rewards), population std (``np.std``, ddof = 0), eps added to the std, not inside a sqrt. The
result is returned in float32 for the loss.

``std_ddof = 1`` divides by the sample std instead (n - 1 in the variance), as VeRL-Omni's advantage,
DanceGRPO and MixGRPO do (``torch.std``): at group size 4 the two differ by sqrt(4/3), 15%. A batch or group
of one has no sample std (0/0); its std is taken as 0 here, and since such a group is its own mean its
advantage is 0, as with ddof 0.

Several rewards (docs/math.md#multi-reward-aggregation): the estimator normalises whatever reward it is given.
``reward_aggregation()`` tells the trainer whether to give it the weighted sum Σ_k w_k r_k (``"reward"``) or
each r_k alone and sum the results as Σ_k w_k A_k (``"advantage"``).
"""

from __future__ import annotations

import torch
from torch import Tensor

from omni_rl.errors import RuntimeFailure
from omni_rl_flow_grpo.config import GRPOAdvantageConfig


class GRPOAdvantage:
    """Rewards and group ids of the whole batch to one float32 advantage per sample."""

    def __init__(self, config: GRPOAdvantageConfig) -> None:
        self.config = config

    def reward_aggregation(self) -> str:
        """``"reward"`` or ``"advantage"``: how the trainer combines several rewards (the ``aggregate`` option)."""
        return self.config.aggregate

    def __call__(self, rewards: Tensor, group_ids: Tensor) -> Tensor:
        r = torch.as_tensor(rewards).to(torch.float64)
        groups = torch.as_tensor(group_ids, device=r.device)
        if r.ndim != 1 or groups.shape != r.shape:
            raise ValueError(
                f"grpo: rewards and group_ids must both have shape (N,), got {tuple(r.shape)} and {tuple(groups.shape)}"
            )
        if r.numel() == 0:
            return torch.zeros(0, dtype=torch.float32, device=r.device)
        if not bool(torch.isfinite(r).all()):
            raise RuntimeFailure(
                "grpo: the rewards contain NaN or infinite values",
                hint="check the reward models (their per-sample scores are logged under reward/)",
            )

        _, inverse, counts = torch.unique(groups, return_inverse=True, return_counts=True)
        counts = counts.to(torch.float64)
        group_mean = torch.zeros_like(counts).index_add_(0, inverse, r) / counts
        centred = r - group_mean[inverse]
        if not self.config.std_normalize:
            return centred.to(torch.float32)

        ddof = self.config.std_ddof
        if self.config.global_std:
            std = r.std(correction=ddof) if r.numel() > ddof else torch.zeros((), dtype=r.dtype, device=r.device)
        else:
            squares = torch.zeros_like(counts).index_add_(0, inverse, centred**2)
            std = _std(squares, counts, ddof)[inverse]
        return (centred / (std + self.config.eps)).to(torch.float32)


def _std(squares: Tensor, counts: Tensor, ddof: int) -> Tensor:
    """Per group sqrt(Σ (r - mean)² / (n - ddof)), and 0 where n <= ddof (one sample has no sample std)."""
    dof = counts - ddof
    return torch.where(dof > 0, squares / dof.clamp_min(1), torch.zeros_like(squares)).sqrt()
