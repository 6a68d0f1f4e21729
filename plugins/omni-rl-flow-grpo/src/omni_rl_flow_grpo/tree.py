"""Tree rollouts' step-level advantages (TreeGRPO arXiv 2512.08153, BranchGRPO arXiv 2509.06040;
docs/math.md#tree-rollouts).

A group of G = Π_d b_d samples is the leaves of a tree: leaf p (its position in the group) passes, after branch
step d, through node c_d(p) = ⌊p / Π_{e>d} b_e⌋ of the depth-d level. The reward flows back to the nodes as the
mean over a node's leaves, V_d(c) = mean_{p: c_d(p) = c} r_p, and the transition of window step d of leaf p is
credited with the advantage of the node it leads to:

- ``"depth"`` (BranchGRPO's depth-wise normalisation): A_d(p) = (V_d(c) − mean_c V_d) / (std_c V_d + eps) over
  the level's nodes of the group (population std). The last level is the leaves: the per-group GRPO advantage.
- ``"sibling"``: A_d(p) = (V_d(c) − V_{d−1}(parent)) / (std + eps), centred on the parent's value (what choosing
  this child over its siblings gained), the std over the level's centred values of the group.

Leaves sharing a node share that step's transition, so the node's term counts once per leaf under it. Rows of a
batch are a group's leaves in request order; :func:`leaf_positions` recovers each sample's p from the group ids.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

TREE_ADVANTAGES: tuple[str, ...] = ("depth", "sibling")


def leaf_positions(group_ids: Sequence[int]) -> list[int]:
    """Each sample's position among its group's samples, in batch order."""
    seen: dict[int, int] = {}
    out = []
    for g in group_ids:
        out.append(seen.get(int(g), 0))
        seen[int(g)] = out[-1] + 1
    return out


def node_index(position: int, branching: Sequence[int], depth: int) -> int:
    """c_d(p): the node of level ``depth`` (after branch step ``depth``) that leaf ``position`` passes through."""
    return position // math.prod(branching[depth + 1 :])


def tree_advantages(
    rewards: Tensor, group_ids: Tensor, branching: Sequence[int], mode: str = "depth", eps: float = 1e-4
) -> Tensor:
    """Step-level advantages (N, D), float32, for the N samples of whole trees (D = len(branching))."""
    r = torch.as_tensor(rewards).to(torch.float64).reshape(-1)
    gids = [int(g) for g in torch.as_tensor(group_ids).reshape(-1).tolist()]
    size = math.prod(branching)
    depth_count = len(branching)
    out = torch.zeros(len(gids), depth_count, dtype=torch.float64)
    rows: dict[int, list[int]] = {}
    for i, g in enumerate(gids):
        rows.setdefault(g, []).append(i)
    for g, members in rows.items():
        if len(members) != size:
            raise ValueError(
                f"tree advantages: group {g} has {len(members)} samples, but tree_branching {list(branching)} has "
                f"{size} leaves; set [rollout] group_size = {size}"
            )
        leaf_r = r[members]
        parent = torch.full((size,), float(leaf_r.mean()), dtype=torch.float64)
        for d in range(depth_count):
            nodes = math.prod(branching[: d + 1])
            values = leaf_r.reshape(nodes, -1).mean(dim=1)  # leaves are in node order: c_d(p) = p // (size / nodes)
            value_of_leaf = values.repeat_interleave(size // nodes)
            baseline = values.mean() if mode == "depth" else parent.reshape(nodes, -1)[:, 0]
            centred_nodes = values - baseline
            std = centred_nodes.pow(2).mean().sqrt()
            out[members, d] = (centred_nodes / (std + eps)).repeat_interleave(size // nodes)
            parent = value_of_leaf
    return out.to(torch.float32)


def column_advantages(advantages: Tensor, extras: Mapping[str, Tensor], position: int | None) -> Tensor:
    """The advantages of one window column: the tree's level ``position`` when the loss prepared tree advantages
    (``extras["tree_advantages"]``, (B, D)), the per-sample ones otherwise."""
    tree = extras.get(TREE_KEY)
    if tree is None:
        return advantages
    if position is None:
        raise ValueError("tree advantages need the window column of each call (TrajectoryLossInputs.window_position)")
    return tree[:, position]


#: the loss's ``prepare`` extra holding (N, D) step-level advantages
TREE_KEY = "tree_advantages"
