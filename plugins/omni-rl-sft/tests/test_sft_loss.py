"""The ``sft`` loss (docs/math.md#sft-loss) against hand computations on a linear stand-in policy (v = a·x_t), its
selections, and the conformance suites of its components."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import pytest
import torch
from omni_rl_sft import hooks
from omni_rl_sft.config import SFTLossConfig
from omni_rl_sft.loss import SFTLoss
from omni_rl_sft.select import select

from omni_rl.batch import ForwardLossInputs
from omni_rl.protocols import Loss
from omni_rl.specs import AlgorithmSpec, LossSpec
from omni_rl.testing import AlgorithmConformance, LossConformance, PluginConformance

A = 0.5
X0 = [[1.0, -1.0], [0.5, 2.0], [0.0, 1.0], [-2.0, 0.5]]
SEEDS = [11, 12, 13, 14]


class Linear:
    def __init__(self) -> None:
        self.a = torch.tensor(A, requires_grad=True)

    def __call__(self, view: str, x_t: torch.Tensor, sigma: torch.Tensor, samples: Any = None) -> torch.Tensor:
        return self.a * x_t


def inputs_for(loss: SFTLoss, rewards: list[float], groups: list[int], idx: list[int]) -> ForwardLossInputs:
    extras = loss.prepare(torch.tensor(rewards), torch.zeros(len(rewards)), torch.tensor(groups))
    x0 = torch.tensor(X0[: len(rewards)]).reshape(len(rewards), 1, 1, 2)
    pick = torch.tensor(idx)
    return ForwardLossInputs(
        x0=x0[pick],
        advantages=torch.zeros(len(idx)),
        rewards=torch.tensor(rewards)[pick],
        group_ids=torch.tensor(groups)[pick],
        generators=[torch.Generator().manual_seed(SEEDS[i]) for i in idx],
        velocity=Linear(),
        extras={k: v[pick] for k, v in extras.items()},
    )


def hand(seed: int, x0: list[float]) -> tuple[float, float]:
    """(e, de/da) of one sample at the draw of its generator: z then ε."""
    generator = torch.Generator().manual_seed(seed)
    t = 1.0 / (1.0 + math.exp(-torch.randn(1, generator=generator).item()))
    eps = torch.randn((1, 1, 2), generator=generator).flatten().tolist()
    x_t = [(1 - t) * x + t * e for x, e in zip(x0, eps, strict=True)]
    u = [e - x for x, e in zip(x0, eps, strict=True)]
    e = sum((A * xt - ut) ** 2 for xt, ut in zip(x_t, u, strict=True)) / 2
    de = sum(2 * (A * xt - ut) * xt for xt, ut in zip(x_t, u, strict=True)) / 2
    return e, de


def test_best_of_each_group_matches_the_hand_computation() -> None:
    loss = SFTLoss(SFTLossConfig(select="best"))
    inputs = inputs_for(loss, [0.1, 0.9, 0.5, 0.2], [0, 0, 1, 1], [0, 1, 2, 3])  # best: 1 and 2
    out = loss(inputs)
    (e1, d1), (e2, d2) = hand(SEEDS[1], X0[1]), hand(SEEDS[2], X0[2])
    assert out.loss.item() == pytest.approx((e1 + e2) / 2, rel=1e-5)
    out.loss.backward()
    assert inputs.velocity.a.grad.item() == pytest.approx((d1 + d2) / 2, rel=1e-4)
    assert out.metrics == pytest.approx({"sft_mse": (e1 + e2) / 2, "selected": 2.0, "groups_skipped": 0.0})


def test_micro_batches_combine_to_the_whole_batch() -> None:
    loss = SFTLoss(SFTLossConfig(select="all"))
    rewards, groups = [0.0, 1.0, 2.0, 3.0], [0, 0, 1, 1]
    whole = loss(inputs_for(loss, rewards, groups, [0, 1, 2, 3]))
    parts = [loss(inputs_for(loss, rewards, groups, idx)) for idx in ([0], [1, 2, 3])]
    assert parts[0].loss.item() * 1 / 4 + parts[1].loss.item() * 3 / 4 == pytest.approx(whole.loss.item(), rel=1e-6)


def test_selections() -> None:
    rewards, groups = torch.tensor([0.1, 0.9, 0.5, 0.5, 0.3]), torch.tensor([0, 0, 1, 1, 2])
    best = select(rewards, groups, mode="best")
    torch.testing.assert_close(best["sft_weight"], torch.tensor([0.0, 5.0, 0.0, 0.0, 0.0]))
    assert best["sft_groups_skipped"][0] == 2.0  # the tie and the group of one
    chosen = select(rewards, groups, mode="chosen")["sft_weight"]
    torch.testing.assert_close(chosen, torch.tensor([5 / 3, 0.0, 5 / 3, 0.0, 5 / 3]))
    torch.testing.assert_close(select(rewards, groups, mode="all")["sft_weight"], torch.ones(5))


def test_nothing_selected_gives_a_zero_loss_that_reaches_the_policy() -> None:
    loss = SFTLoss(SFTLossConfig(select="best"))
    out = loss(inputs_for(loss, [1.0, 1.0], [0, 0], [0, 1]))
    assert out.loss.item() == 0.0 and out.loss.requires_grad


class TestSFTPlugin(PluginConformance):
    @pytest.fixture
    def hooks_module(self) -> str:
        return "omni_rl_sft.hooks"


class TestSFTLoss(LossConformance):
    @pytest.fixture
    def spec(self) -> LossSpec:
        return hooks.omni_rl_losses()[0]

    @pytest.fixture(params=[{}, {"select": "all", "timesteps": 2, "timestep_range": [0.2, 1.0]}], ids=["best", "all"])
    def options(self, request: pytest.FixtureRequest) -> dict[str, Any]:
        return request.param

    @pytest.fixture
    def loss_inputs(self, component: Loss) -> ForwardLossInputs:
        n = self.batch_size
        generator = torch.Generator().manual_seed(0)
        group_ids = torch.arange(n) // 2
        rewards = torch.arange(n, dtype=torch.float32) % 3
        return ForwardLossInputs(
            x0=torch.randn((n, *self.latent_shape), generator=generator),
            advantages=torch.zeros(n),
            rewards=rewards,
            group_ids=group_ids,
            generators=[torch.Generator().manual_seed(100 + i) for i in range(n)],
            velocity=Linear(),
            extras=component.prepare(rewards, torch.zeros(n), group_ids),
        )

    def gradient_leaves(self, loss_inputs: Any) -> list[Any]:
        return [loss_inputs.velocity.a]


class TestOnlineSFTAlgorithm(AlgorithmConformance):
    complete_with: ClassVar[dict[str, Any]] = {
        "model": {"name": "sd3", "options": {"path": "unused/by/resolution"}},
        "reward": [{"name": "jpeg_compressibility"}],
    }

    @pytest.fixture(params=["online_sft", "sft_offline"])
    def spec(self, request: pytest.FixtureRequest) -> AlgorithmSpec:
        (spec,) = [s for s in hooks.omni_rl_algorithms() if s.name == request.param]
        return spec
