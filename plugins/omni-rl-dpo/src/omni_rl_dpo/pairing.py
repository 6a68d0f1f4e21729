"""Which samples of a step's batch form DPO pairs: ``DPOLoss.prepare`` runs this on the
driver (docs/math.md#diffusion-dpo-loss).

The result is four per-sample tensors (the loss's ``extras``, sliced to each micro-batch):

- ``dpo_role``: +1 chosen (w), -1 rejected (l), 0 unused; with ``pairing = "all_pairs"``, +2 for a sample in at
  least one pair (it is chosen in some and rejected in others). A pair is two samples of one group (prompt), so the
  update's group batching keeps both in one micro-batch.
- ``dpo_group_paired`` (``all_pairs`` only): how many of the sample's group are paired, so that the loss, which
  forms the same pairs from the micro-batch's rewards (:func:`all_pairs_of`), can tell a whole group from a split
  one.
- ``dpo_weight``: N / P on every sample (N samples, P pairs in the whole batch; 0 when P = 0). The loss sums
  its pairs' terms times this weight and divides by the micro-batch's sample count B. The update weights a
  micro-batch by B / (mini-batch size) and averages metrics weighted by B, so the step's loss and every metric
  come out as exact means over the batch's pairs, however the groups fall into micro-batches and workers.
- ``dpo_pairs`` (P) and ``dpo_groups_skipped``: the same count on every sample, logged as ``pairs`` and
  ``groups_skipped`` (a constant is its own sample-weighted mean). ``prepare`` can only return tensors, so the
  counts ride along with the samples.
"""

from __future__ import annotations

import torch
from torch import Tensor

from omni_rl.errors import RuntimeFailure

ROLE = "dpo_role"
WEIGHT = "dpo_weight"
PAIRS = "dpo_pairs"
GROUPS_SKIPPED = "dpo_groups_skipped"
GROUP_PAIRED = "dpo_group_paired"
CHOSEN, REJECTED, UNUSED, PAIRED = 1, -1, 0, 2


def _groups(group_ids: Tensor) -> list[list[int]]:
    """Sample positions of each group, groups in order of first appearance, members in batch order."""
    members: dict[int, list[int]] = {}
    for position, gid in enumerate(group_ids.tolist()):
        members.setdefault(int(gid), []).append(position)
    return list(members.values())


def pair_by_reward(rewards: Tensor, group_ids: Tensor, *, min_spread: float = 0.0) -> dict[str, Tensor]:
    """Online pairing: in each group, the best reward is chosen and the worst rejected.

    Ties go to the earliest sample in batch order (for both ends). A group whose best - worst reward is not above
    ``min_spread`` (every group of one sample, and every group of equal rewards when ``min_spread = 0``) carries
    no preference: it is skipped and counted.
    """
    values = _checked(rewards, group_ids)
    roles = torch.zeros(values.shape[0], dtype=torch.long)
    skipped = 0
    for members in _groups(group_ids.reshape(-1)):
        scores = [float(values[i]) for i in members]
        best, worst = max(scores), min(scores)
        if not best - worst > min_spread:
            skipped += 1
            continue
        roles[members[scores.index(best)]] = CHOSEN
        roles[members[scores.index(worst)]] = REJECTED
    return _extras(roles, skipped)


def _checked(rewards: Tensor, group_ids: Tensor) -> Tensor:
    """The rewards as a flat float64 tensor, refused when they do not match the group ids or are not finite."""
    values = rewards.detach().to(torch.float64).reshape(-1)
    if values.shape[0] != group_ids.reshape(-1).shape[0]:
        raise RuntimeFailure(
            f"dpo: {values.shape[0]} rewards for {group_ids.numel()} group ids",
            hint="prepare takes one reward and one group id per sample",
        )
    if not bool(torch.isfinite(values).all()):
        raise RuntimeFailure(
            "dpo: a reward is NaN or infinite, so the group's best and worst samples are undefined",
            hint='check the reward models; [[reward]] on_error = "zero" scores a failing batch 0',
        )
    return values


def all_pairs_of(scores: list[float], *, min_spread: float) -> list[tuple[int, int]]:
    """Every (chosen, rejected) pair of one group's scores, as indices into ``scores``: i is preferred to j when
    scores[i] - scores[j] > min_spread. In order of i, then j, so that prepare and the loss list them alike."""
    return [(i, j) for i, high in enumerate(scores) for j, low in enumerate(scores) if high - low > min_spread]


def pair_all_by_reward(rewards: Tensor, group_ids: Tensor, *, min_spread: float = 0.0) -> dict[str, Tensor]:
    """Online pairing on every high/low pair of each group, not only its best and worst.

    A group of k samples with distinct rewards gives k(k-1)/2 pairs and uses all k samples, where best/worst uses 2:
    more preferences from each sampled image. Pairs closer than ``min_spread`` are dropped; a group with no pair
    left is skipped and counted.
    """
    values = _checked(rewards, group_ids).to(torch.float32)  # the loss pairs the same float32 rewards
    roles = torch.zeros(values.shape[0], dtype=torch.long)
    paired = torch.zeros(values.shape[0], dtype=torch.float32)
    skipped = pairs = 0
    for members in _groups(group_ids.reshape(-1)):
        found = all_pairs_of([float(values[i]) for i in members], min_spread=min_spread)
        if not found:
            skipped += 1
            continue
        pairs += len(found)
        in_pairs = sorted({members[i] for pair in found for i in pair})
        roles[in_pairs] = PAIRED
        paired[in_pairs] = float(len(in_pairs))
    return {**_extras(roles, skipped, pairs=pairs), GROUP_PAIRED: paired}


def pair_in_order(group_ids: Tensor) -> dict[str, Tensor]:
    """Offline pairing: every group is exactly (chosen, rejected), in batch order.

    That is how the ``preference_pairs`` rollout backend lays out a preference file's pairs. Nothing is
    skipped: a preference pair always carries one.
    """
    roles = torch.zeros(group_ids.numel(), dtype=torch.long)
    for members in _groups(group_ids.reshape(-1)):
        if len(members) != 2:
            raise RuntimeFailure(
                f"dpo: pairing = 'offline' needs groups of exactly 2 samples (chosen, rejected), got a group of "
                f"{len(members)}",
                hint='use [rollout] name = "preference_pairs" (the "dpo_offline" preset) with offline pairing, '
                'or [loss] options.pairing = "reward" for online rollouts',
            )
        roles[members[0]] = CHOSEN
        roles[members[1]] = REJECTED
    return _extras(roles, 0)


def _extras(roles: Tensor, skipped: int, *, pairs: int | None = None) -> dict[str, Tensor]:
    n = roles.shape[0]
    pairs = int((roles == CHOSEN).sum()) if pairs is None else pairs
    weight = n / pairs if pairs else 0.0
    return {
        ROLE: roles,
        WEIGHT: torch.full((n,), weight, dtype=torch.float32),
        PAIRS: torch.full((n,), float(pairs), dtype=torch.float32),
        GROUPS_SKIPPED: torch.full((n,), float(skipped), dtype=torch.float32),
    }
