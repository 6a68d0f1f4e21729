"""Tree rollouts' step-level advantages on hand-drawn trees (docs/math.md#tree-rollouts), the flow_grpo loss taking
each window column's level, and the config checks.

The tree of one group, branching [2, 2] (leaves 0-3, rewards under them):

            root (V = mean of all)
           /                      \\
      node 0 (leaves 0, 1)     node 1 (leaves 2, 3)
       /        \\               /        \\
    r = 1     r = 1         r = 0     r = 0.5
"""

from __future__ import annotations

import math

import pytest
import torch
from omni_rl_flow_grpo.config import FlowGRPOLossConfig
from omni_rl_flow_grpo.loss import FlowGRPOLoss
from omni_rl_flow_grpo.tree import TREE_KEY, tree_advantages

from omni_rl.batch import SamplerStep, TrajectoryLossInputs

REWARDS = torch.tensor([1.0, 1.0, 0.0, 0.5])


def test_depth_advantages_by_hand() -> None:
    adv = tree_advantages(REWARDS, torch.zeros(4, dtype=torch.long), [2, 2], "depth", eps=0.0)
    # level 0: V = [1, 0.25], centred ±0.375, std 0.375
    assert adv[:, 0].tolist() == pytest.approx([1, 1, -1, -1])
    # level 1: the leaves, centred on their mean 0.625: [0.375, 0.375, -0.625, -0.125], std sqrt(0.171875)
    std = math.sqrt((0.375**2 * 2 + 0.625**2 + 0.125**2) / 4)
    assert adv[:, 1].tolist() == pytest.approx([0.375 / std, 0.375 / std, -0.625 / std, -0.125 / std], rel=1e-6)


def test_sibling_advantages_by_hand() -> None:
    adv = tree_advantages(REWARDS, torch.zeros(4, dtype=torch.long), [2, 2], "sibling", eps=0.0)
    assert adv[:, 0].tolist() == pytest.approx([1, 1, -1, -1])  # the root is the parent: as "depth"
    # level 1 centred on the parent: [0, 0, -0.25, 0.25], rms sqrt(0.03125)
    rms = math.sqrt(2 * 0.25**2 / 4)
    assert adv[:, 1].tolist() == pytest.approx([0, 0, -0.25 / rms, 0.25 / rms], rel=1e-6)


def test_groups_are_separate_trees_and_a_wrong_size_is_refused() -> None:
    rewards = torch.cat([REWARDS, torch.tensor([0.0, 0.0, 0.0, 2.0])])
    groups = torch.tensor([3, 3, 3, 3, 8, 8, 8, 8])
    adv = tree_advantages(rewards, groups, [2, 2], "depth")
    alone = tree_advantages(REWARDS, torch.zeros(4, dtype=torch.long), [2, 2], "depth")
    assert torch.allclose(adv[:4], alone)
    assert adv[4:, 0].tolist() == pytest.approx([-1, -1, 1, 1], abs=1e-3)
    with pytest.raises(ValueError, match="group_size = 4"):
        tree_advantages(REWARDS[:3], torch.zeros(3, dtype=torch.long), [2, 2])


def test_the_loss_trains_each_column_with_its_levels_advantage_and_starts_on_policy() -> None:
    loss = FlowGRPOLoss(FlowGRPOLossConfig(tree_branching=(2, 2), clip_ratio=0.1))
    extras = loss.prepare(REWARDS, torch.zeros(4), torch.zeros(4, dtype=torch.long))
    tree = extras[TREE_KEY]
    assert tree.shape == (4, 2)
    for column in (0, 1):
        log_prob = torch.zeros(4, requires_grad=True)
        step = SamplerStep(sample=torch.zeros(4, 1), mean=torch.zeros(4, 1), std_dev_t=torch.ones(4), log_prob=log_prob)
        inputs = TrajectoryLossInputs(
            current=step,
            old_log_prob=torch.zeros(4),
            advantages=torch.full((4,), 9.0),
            extras=extras,
            window_position=column,
        )
        out = loss(inputs)
        assert out.metrics["ratio_mean"] == 1.0  # on-policy: the first ratio is exactly 1
        (grad,) = torch.autograd.grad(out.loss, log_prob)
        assert torch.allclose(grad, -tree[:, column] / 4)  # d/dlogp of mean(−Â·ρ) at ρ = 1


def test_check_wants_the_same_tree_in_sampler_and_loss_and_the_leaves_as_the_group() -> None:
    from types import SimpleNamespace

    from omni_rl_flow_grpo.checks import flow_grpo_loss_check
    from omni_rl_flow_grpo.config import FlowSDEConfig

    def components(loss_tree, sampler_tree, group_size):
        return {
            "loss": SimpleNamespace(options=FlowGRPOLossConfig(tree_branching=loss_tree)),
            "sampler": SimpleNamespace(
                name="flow_sde", options=FlowSDEConfig(window_size=len(sampler_tree) or 2, tree_branching=sampler_tree)
            ),
            "rollout": SimpleNamespace(options=SimpleNamespace(group_size=group_size, steps=10)),
        }

    assert flow_grpo_loss_check(components((4, 2), (4, 2), 8)) == []
    (problem,) = flow_grpo_loss_check(components((), (4, 2), 8))
    assert "$.loss.options.tree_branching" in problem
    (problem,) = flow_grpo_loss_check(components((4, 2), (4, 2), 6))
    assert "group_size = 8" in problem


def test_the_window_option_is_validated() -> None:
    from omni_rl_flow_grpo.config import FlowSDEConfig

    with pytest.raises(ValueError, match="window_size = 2"):
        FlowSDEConfig(window_size=3, tree_branching=(2, 2))
    with pytest.raises(ValueError, match=">= 2"):
        FlowSDEConfig(window_size=2, tree_branching=(2, 1))
