"""How one step's batch is split across N policy workers, and how the update walks it.

Rollouts are split by whole prompt groups (contiguous), so a worker holds every sample of its groups and
pairwise losses never need another worker's samples. The update walks *global* mini-batches: every worker draws
the same permutation of all sample ids, cuts it into the same mini-batches, and processes the part it holds; each
contribution is weighted by the global mini-batch size and gradients are summed across workers. The optimizer
steps are therefore the same whatever the number of workers (up to float summation order).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import attrs
import torch


def split_groups(group_ids: Sequence[int], workers: int) -> list[list[int]]:
    """Sample positions of each worker: contiguous runs of whole groups, as even as possible."""
    groups: dict[int, list[int]] = {}
    for position, gid in enumerate(group_ids):
        groups.setdefault(int(gid), []).append(position)
    ordered = list(groups.values())
    shards: list[list[int]] = [[] for _ in range(workers)]
    per, extra = divmod(len(ordered), workers)
    start = 0
    for rank in range(workers):
        count = per + (1 if rank < extra else 0)
        for members in ordered[start : start + count]:
            shards[rank].extend(members)
        start += count
    return shards


@attrs.frozen
class Shard:
    """The samples one worker holds: their global ids (in local order) and every sample's group id."""

    sample_ids: tuple[int, ...] = attrs.field(converter=tuple)
    global_group_ids: tuple[int, ...] = attrs.field(converter=tuple)

    @classmethod
    def whole(cls, group_ids: Sequence[int]) -> Shard:
        return cls(range(len(group_ids)), group_ids)

    @property
    def global_n(self) -> int:
        return len(self.global_group_ids)

    def local_positions(self, global_ids: Sequence[int]) -> torch.Tensor:
        index = {gid: k for k, gid in enumerate(self.sample_ids)}
        return torch.as_tensor([index[g] for g in global_ids if g in index], dtype=torch.long)

    def units(self, order: Sequence[int], unit: Literal["sample", "group"]) -> list[list[int]]:
        """Global ids in ``order`` grouped into batch units (a group stays together, in id order)."""
        if unit == "sample":
            return [[int(i)] for i in order]
        groups: dict[int, list[int]] = {}
        for i in order:
            groups.setdefault(self.global_group_ids[int(i)], []).append(int(i))
        return [sorted(members) for members in groups.values()]

    def minibatches(
        self, generator: torch.Generator, size: int, unit: Literal["sample", "group"] = "sample"
    ) -> list[list[int]]:
        """The same global mini-batches (lists of global ids) on every worker."""
        order = torch.randperm(self.global_n, generator=generator).tolist()
        return pack(self.units(order, unit), size or self.global_n)


def pack(units: list[list[int]], size: int) -> list[list[int]]:
    """Consecutive units packed into chunks of about ``size`` ids; a unit is never split."""
    chunks: list[list[int]] = []
    current: list[int] = []
    for unit in units:
        if current and len(current) + len(unit) > size:
            chunks.append(current)
            current = []
        current = current + unit
    if current:
        chunks.append(current)
    return chunks
