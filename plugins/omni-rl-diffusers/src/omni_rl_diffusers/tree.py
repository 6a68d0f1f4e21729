"""Tree rollouts (TreeGRPO / BranchGRPO; docs/math.md#tree-rollouts) in the diffusers backend.

A group is a tree: its root is one x_T drawn from (run seed, step, group), the steps before the SDE window are ODE
steps of that one state, and window step d turns every node into ``branching[d]`` children, each with its own noise
drawn from (run seed, step, group, d, child). The group's G = Π b_d samples are the leaves, in group order: leaf p
passes through node ⌊p / Π_{e>d} b_e⌋ after branch step d. Rows that share a node hold the same latents bit for bit
(same inputs, same per-row operations), so the transformer runs once per node: the rollout's model calls are
Σ_steps (distinct nodes) instead of G per step. The sharing is within a rollout chunk (``[rollout] batch_size``): a
chunk that holds whole groups saves the most.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from omni_rl.errors import ConfigError
from omni_rl.seeding import keyed_generator

#: keeps the tree's branch-noise stream apart from the other (seed, step, id)-keyed streams
_TREE_NOISE_SALT = 4_343


def leaf_positions(group_ids: Sequence[int]) -> list[int]:
    """Each sample's position among its group's samples, in request order."""
    seen: dict[int, int] = {}
    out = []
    for g in group_ids:
        out.append(seen.get(int(g), 0))
        seen[int(g)] = out[-1] + 1
    return out


def check_tree(branching: Sequence[int], window: range, group_ids: Sequence[int]) -> None:
    """The window has one step per branch level and every group holds exactly the tree's leaves."""
    if len(window) != len(branching):
        raise ConfigError(
            f"tree rollout: the SDE window has {len(window)} steps but tree_branching {list(branching)} has "
            f"{len(branching)} levels",
            hint="set $.sampler.options.window_size to len(tree_branching) and keep the window inside the schedule",
        )
    leaves = math.prod(branching)
    counts: dict[int, int] = {}
    for g in group_ids:
        counts[int(g)] = counts.get(int(g), 0) + 1
    bad = {g: n for g, n in counts.items() if n != leaves}
    if bad:
        raise ConfigError(
            f"tree rollout: tree_branching {list(branching)} has {leaves} leaves, but groups hold "
            f"{sorted(set(bad.values()))} samples",
            hint=f"set $.rollout.options.group_size = {leaves}",
        )


def node_keys(
    group_ids: Sequence[int], positions: Sequence[int], branching: Sequence[int], done: int
) -> list[tuple[int, int]]:
    """Each row's node after ``done`` branch steps: (group, node index), node −1 being the root."""
    if done == 0:
        return [(int(g), -1) for g in group_ids]
    below = math.prod(branching[done:])
    return [(int(g), p // below) for g, p in zip(group_ids, positions, strict=True)]


def unique_rows(keys: Sequence[tuple[int, int]]) -> tuple[list[int], torch.Tensor]:
    """(the first row of each distinct key, each row's index into that list)."""
    first: dict[tuple[int, int], int] = {}
    order: list[int] = []
    inverse = []
    for row, key in enumerate(keys):
        if key not in first:
            first[key] = len(order)
            order.append(row)
        inverse.append(first[key])
    return order, torch.as_tensor(inverse, dtype=torch.long)


def branch_noise(
    run_seed: int, step: int, keys: Sequence[tuple[int, int]], depth: int, shape: tuple[int, ...]
) -> torch.Tensor:
    """The noise of each row's child node at branch step ``depth``: one draw per (group, depth, child)."""
    cache: dict[tuple[int, int], torch.Tensor] = {}
    out = []
    for key in keys:
        if key not in cache:
            generator = keyed_generator(run_seed, step + 1, key[0], depth, key[1], _TREE_NOISE_SALT)
            cache[key] = torch.randn(shape, generator=generator, dtype=torch.float32)
        out.append(cache[key])
    return torch.stack(out)
