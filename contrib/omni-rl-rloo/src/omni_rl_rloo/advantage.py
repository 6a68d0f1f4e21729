"""RLOO: each sample's reward minus the mean reward of the *other* samples of its group.

For a group of G samples with rewards r_1..r_G, the baseline of sample i is b_i = (Σ_j r_j − r_i) / (G − 1), so
A_i = r_i − b_i = G/(G−1) · (r_i − mean(r)). The baseline does not depend on r_i, which keeps the policy gradient
unbiased (Ahmadian et al. 2024, "Back to Basics: Revisiting REINFORCE Style Optimization for Learning from Human
Feedback in LLMs"); GRPO's group mean includes r_i and so shrinks every advantage by (G−1)/G. A group of one
sample has no other sample to compare with: its advantage is 0 (no signal), never NaN.
"""

from __future__ import annotations

import torch
from torch import Tensor

from omni_rl_rloo.config import RLOOConfig


class RLOOAdvantage:
    """``rewards`` (N,) float and ``group_ids`` (N,) int → advantages (N,) float32 (see the module docstring)."""

    def __init__(self, config: RLOOConfig) -> None:
        self.config = config

    def __call__(self, rewards: Tensor, group_ids: Tensor) -> Tensor:
        rewards = rewards.to(torch.float64)
        groups = torch.as_tensor(group_ids, device=rewards.device)
        _, index, counts = torch.unique(groups, return_inverse=True, return_counts=True)
        sums = torch.zeros(len(counts), dtype=torch.float64, device=rewards.device).index_add_(0, index, rewards)
        size = counts[index].to(torch.float64)
        others = (size - 1).clamp(min=1)  # a group of one: baseline = its own reward, advantage 0
        advantages = rewards - (sums[index] - rewards) / others
        advantages = torch.where(size > 1, advantages, torch.zeros_like(advantages))
        if self.config.scale == "group_std":
            means = sums / counts
            squares = torch.zeros_like(sums).index_add_(0, index, (rewards - means[index]) ** 2)
            std = (squares / counts).sqrt()[index]  # population std of the group
            advantages = advantages / (std + self.config.eps)
        return advantages.to(torch.float32)
