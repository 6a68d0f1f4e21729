"""Multi-reward advantage aggregation (omni_rl.train.advantages, docs/math.md#multi-reward-aggregation) against
hand-computed
values, and the trainer's step through it with toy components (no Ray: a stand-in worker group).

The estimator is a group z-score (population std, eps 1e-4) computed here with Python floats. Two rewards with
weights 2 and 0.5: ``"reward"`` normalises 2·r₁ + 0.5·r₂; ``"advantage"`` uses 2·A(r₁) + 0.5·A(r₂).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
import torch
from core_toys import TOY_CONFIG, ToyAdvantage, ToyAdvantageConfig, ToyPlugin

from omni_rl.batch import RewardResult
from omni_rl.config import load_config
from omni_rl.engine.stepping import UpdateStats
from omni_rl.errors import RuntimeFailure
from omni_rl.hookspecs import hookimpl
from omni_rl.protocols import RolloutOutcome, RolloutRequest
from omni_rl.rewards.combined import ScoredBatch
from omni_rl.specs import AdvantageSpec, RewardSpec
from omni_rl.testing import InlinePlugin, make_registry
from omni_rl.train.advantages import compute_advantages, reward_aggregation
from omni_rl.train.trainer import Trainer

R1 = [1.0, 3.0, 2.0, 6.0]  # groups {0, 1} and {2, 3}
R2 = [0.4, 0.1, 0.9, 0.3]
GROUPS = [0, 0, 1, 1]
W1, W2 = 2.0, 0.5


def _z(rewards: Sequence[float], groups: Sequence[int], eps: float = 1e-4) -> list[float]:
    """(r - group mean) / (group population std + eps), by hand."""
    out = []
    for r, g in zip(rewards, groups, strict=True):
        members = [x for x, h in zip(rewards, groups, strict=True) if h == g]
        mean = sum(members) / len(members)
        std = math.sqrt(sum((x - mean) ** 2 for x in members) / len(members))
        out.append((r - mean) / (std + eps))
    return out


def _scored(r1: Sequence[float] = R1, r2: Sequence[float] = R2) -> ScoredBatch:
    s1, s2 = np.array(r1), np.array(r2)
    return ScoredBatch(
        total=W1 * s1 + W2 * s2,
        scores={"one": s1, "two": s2},
        details={"one": {}, "two": {}},
        failures={},
        weights={"one": W1, "two": W2},
    )


class Aggregating(ToyAdvantage):
    def __init__(self, mode: str) -> None:
        super().__init__(ToyAdvantageConfig())
        self.mode = mode

    def reward_aggregation(self) -> str:
        return self.mode


def test_reward_aggregation_normalises_the_weighted_sum() -> None:
    result = compute_advantages(Aggregating("reward"), _scored(), torch.tensor(GROUPS))
    total = [W1 * a + W2 * b for a, b in zip(R1, R2, strict=True)]
    assert result.total.dtype == torch.float32
    assert result.total.tolist() == pytest.approx(_z(total, GROUPS), rel=1e-5)


def test_advantage_aggregation_sums_the_weighted_per_reward_advantages() -> None:
    result = compute_advantages(Aggregating("advantage"), _scored(), torch.tensor(GROUPS))
    a1, a2 = _z(R1, GROUPS), _z(R2, GROUPS)
    expected = [W1 * x + W2 * y for x, y in zip(a1, a2, strict=True)]
    assert result.total.dtype == torch.float32 and result.total.shape == (4,)
    assert result.total.tolist() == pytest.approx(expected, rel=1e-5)
    # the two aggregations really differ on these rewards (r₁ has the larger spread and dominates the sum)
    assert not np.allclose(expected, _z([W1 * a + W2 * b for a, b in zip(R1, R2, strict=True)], GROUPS))


def test_per_reward_advantages_and_their_metrics_with_two_rewards() -> None:
    for mode in ("reward", "advantage"):
        result = compute_advantages(Aggregating(mode), _scored(), torch.tensor(GROUPS))
        a1, a2 = _z(R1, GROUPS), _z(R2, GROUPS)
        assert result.per_reward["one"].tolist() == pytest.approx(a1, rel=1e-5)
        assert result.per_reward["two"].tolist() == pytest.approx(a2, rel=1e-5)
        metrics = result.metrics()
        assert set(metrics) == {f"advantage/{n}/{k}" for n in ("one", "two") for k in ("abs_mean", "std")}
        assert metrics["advantage/one/abs_mean"] == pytest.approx(sum(abs(a) for a in a1) / 4, rel=1e-5)
        assert metrics["advantage/two/std"] == pytest.approx(float(np.std(a2)), rel=1e-5)


def test_one_reward_logs_no_sub_advantages() -> None:
    s = np.array(R1)
    one = ScoredBatch(total=W1 * s, scores={"one": s}, details={"one": {}}, failures={}, weights={"one": W1})
    assert compute_advantages(Aggregating("reward"), one, torch.tensor(GROUPS)).metrics() == {}
    result = compute_advantages(Aggregating("advantage"), one, torch.tensor(GROUPS))
    assert result.metrics() == {}
    # w·A, docs/math.md#multi-reward-aggregation
    assert result.total.tolist() == pytest.approx([W1 * a for a in _z(R1, GROUPS)], rel=1e-5)


def test_reward_aggregation_is_todays_call_bit_for_bit() -> None:
    """Without the member, or with "reward", the advantage is exactly estimator(float32 total) as before."""
    scored, groups = _scored(), torch.tensor(GROUPS)
    before = ToyAdvantage(ToyAdvantageConfig())(torch.as_tensor(scored.total, dtype=torch.float32), groups)
    for estimator in (ToyAdvantage(ToyAdvantageConfig()), Aggregating("reward")):
        assert torch.equal(compute_advantages(estimator, scored, groups).total, before)


def test_default_and_bad_aggregation() -> None:
    assert reward_aggregation(ToyAdvantage(ToyAdvantageConfig())) == "reward"
    assert reward_aggregation(Aggregating("advantage")) == "advantage"
    with pytest.raises(RuntimeFailure, match="returned 'sum'"):
        reward_aggregation(Aggregating("sum"))


def test_advantage_aggregation_needs_the_weights() -> None:
    scored = attrs.evolve(_scored(), weights={"one": W1})
    with pytest.raises(RuntimeFailure, match=r"none for \['two'\]"):
        compute_advantages(Aggregating("advantage"), scored, torch.tensor(GROUPS))


# -- the trainer's step -----------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class AggregatingConfig:
    aggregate: str = "reward"


class RedReward:
    """Mean of the red channel in [0, 1]: a second reward that is not a function of the toys' brightness."""

    def __call__(
        self, images: np.ndarray, prompts: Sequence[str], metadata: Sequence[Mapping[str, Any]]
    ) -> RewardResult:
        return RewardResult(scores=np.asarray(images, dtype=np.float64)[..., 0].mean(axis=(1, 2)) / 255.0)


class AggregationPlugin:
    @hookimpl
    def omni_rl_advantage_estimators(self) -> list[AdvantageSpec]:
        return [
            AdvantageSpec(
                name="toy_grpo_agg",
                factory=lambda c, ctx: Aggregating(c.aggregate),
                config=AggregatingConfig,
                summary="group z-score with an aggregate option",
            )
        ]

    @hookimpl
    def omni_rl_reward_models(self) -> list[RewardSpec]:
        return [RewardSpec(name="toy_red", factory=lambda c, ctx: RedReward(), summary="red channel")]


class StandInGroup:
    """The worker group: images drawn from each sample's seed; remembers the advantages the update received."""

    def __init__(self) -> None:
        self.advantages: np.ndarray | None = None

    def rollout(self, request: RolloutRequest) -> RolloutOutcome:
        images = np.stack(
            [np.random.default_rng(s).integers(0, 256, size=(8, 8, 3), dtype=np.uint8) for s in request.seeds]
        )
        return RolloutOutcome(images=images, prompts=request.prompts, group_ids=np.asarray(request.group_ids))

    def update(self, advantages: np.ndarray, extras: dict, step: int, rewards: np.ndarray, group_ids: list) -> list:
        self.advantages = np.asarray(advantages)
        return [UpdateStats(lr=0.0)]


def _step(write_config: Callable[..., Path], tmp_path: Path, aggregate: str) -> tuple[dict, StandInGroup, Trainer]:
    registry = make_registry(InlinePlugin(ToyPlugin(), "omni-rl-toys", "1"), InlinePlugin(AggregationPlugin(), "agg"))
    registry.validate()
    (tmp_path / "train.txt").write_text("t1\nt2\n")
    text = TOY_CONFIG + (
        f'\n[[reward]]\nname = "toy_red"\nweight = 0.5\n'
        f'\n[advantage]\nname = "toy_grpo_agg"\noptions = {{ aggregate = "{aggregate}" }}\n'
        f'\n[data]\ntrain = "{tmp_path / "train.txt"}"\n'
        "\n[rollout]\noptions = { group_size = 4 }\n"  # groups of 4: z-scores that are not just ±1
    )
    trainer = Trainer(load_config(write_config(text), registry=registry))
    group = StandInGroup()
    metrics = trainer.train_step(group, 1, tmp_path)  # type: ignore[arg-type]
    return metrics, group, trainer


@pytest.mark.parametrize("aggregate", ["reward", "advantage"])
def test_the_trainer_step_aggregates_as_the_estimator_says(
    aggregate: str, write_config: Callable[..., Path], tmp_path: Path
) -> None:
    metrics, group, trainer = _step(write_config, tmp_path, aggregate)
    assert group.advantages is not None and trainer.group_size == 4
    n = len(group.advantages)
    groups = [k // trainer.group_size for k in range(n)]
    images = (
        StandInGroup()
        .rollout(RolloutRequest(prompts=[""] * n, group_ids=groups, seeds=_seeds(trainer, n), step=1))
        .images
        / 255.0
    )
    bright, red = images.mean(axis=(1, 2, 3)), images[..., 0].mean(axis=(1, 2))  # the toys' reward, weight 2
    if aggregate == "reward":
        expected = _z(list(2.0 * bright + 0.5 * red), groups)
    else:
        expected = [2.0 * x + 0.5 * y for x, y in zip(_z(list(bright), groups), _z(list(red), groups), strict=True)]
    assert group.advantages.tolist() == pytest.approx(expected, rel=1e-4, abs=1e-5)
    for name, rewards in (("toy_brightness", bright), ("toy_red", red)):
        assert metrics[f"advantage/{name}/abs_mean"] == pytest.approx(
            np.mean(np.abs(_z(list(rewards), groups))), rel=1e-4
        )
        assert f"advantage/{name}/std" in metrics
    assert metrics["advantage/abs_mean"] == pytest.approx(float(np.mean(np.abs(expected))), rel=1e-4)


def _seeds(trainer: Trainer, n: int) -> list[int]:
    from omni_rl.train.trainer import sample_seeds

    return sample_seeds(trainer.config.run.seed, 1, n)
