"""Which samples of a step's batch the ``sft`` loss trains on; ``SFTLoss.prepare`` runs this on the driver.

The result is per-sample extras: ``sft_weight`` = N / S on the S selected samples of the N (0 elsewhere), so
that the loss's sum of weight·e over a micro-batch divided by its B samples is the exact mean over the selected
samples however the batch is cut (as the dpo plugin's pair weight), and ``sft_selected`` / ``sft_groups_skipped``
counts, logged.
"""

from __future__ import annotations

import torch
from torch import Tensor

WEIGHT = "sft_weight"
SELECTED = "sft_selected"
SKIPPED = "sft_groups_skipped"


def select(rewards: Tensor, group_ids: Tensor, *, mode: str, min_spread: float = 0.0) -> dict[str, Tensor]:
    """The demonstration mask by ``mode`` ("all", "best", "chosen"), as weights and counts."""
    n = group_ids.numel()
    chosen = torch.zeros(n, dtype=torch.bool)
    skipped = 0
    members: dict[int, list[int]] = {}
    for position, gid in enumerate(group_ids.reshape(-1).tolist()):
        members.setdefault(int(gid), []).append(position)
    values = rewards.detach().to(torch.float64).reshape(-1)
    for positions in members.values():
        if mode == "all":
            chosen[positions] = True
        elif mode == "chosen":
            chosen[positions[0]] = True
        else:
            scores = [float(values[i]) for i in positions]
            if not max(scores) - min(scores) > min_spread:
                skipped += 1
                continue
            chosen[positions[scores.index(max(scores))]] = True  # ties: the earliest in batch order
    count = int(chosen.sum())
    weight = torch.where(chosen, torch.tensor(n / count if count else 0.0), torch.tensor(0.0)).float()
    return {
        WEIGHT: weight,
        SELECTED: torch.full((n,), float(count)),
        SKIPPED: torch.full((n,), float(skipped)),
    }
