"""Rewards that fail (issue 22): NaN/inf scores are left out of the group statistics and counted, a wrong count
is an error naming the reward and the counts, a raising reward stops the run with the resume command."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
import torch

from omni_rl.errors import RuntimeFailure
from omni_rl.rewards.combined import CombinedReward, ScoredBatch
from omni_rl.rundir import checkpoint
from omni_rl.train.advantages import compute_advantages, finite_only, neutral_nonfinite


class GroupCentred:
    """A minimal estimator: reward minus its group's mean (what GRPO does before the std)."""

    def __call__(self, rewards: torch.Tensor, group_ids: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(rewards)
        for g in torch.unique(group_ids):
            members = group_ids == g
            out[members] = rewards[members] - rewards[members].mean()
        return out


def scored(total: list[float]) -> ScoredBatch:
    values = np.asarray(total, dtype=np.float64)
    return ScoredBatch(
        total=values,
        scores={"r": values},
        details={"r": {}},
        failures={},
        weights={"r": 1.0},
        nonfinite={"r": int(np.sum(~np.isfinite(values)))},
    )


def test_non_finite_scores_get_no_advantage_and_leave_their_group_statistics_alone() -> None:
    batch = scored([1.0, float("nan"), 3.0, 0.0, float("inf"), 2.0])
    groups = torch.tensor([0, 0, 0, 1, 1, 1])
    advantages = compute_advantages(GroupCentred(), batch, groups).total
    # group 0's mean is 2 (of 1 and 3), group 1's is 1 (of 0 and 2); the NaN and inf samples get 0
    assert advantages.tolist() == [-1.0, 0.0, 1.0, -1.0, 0.0, 1.0]
    metrics = batch.metrics()
    assert metrics["reward/r/nonfinite"] == 2.0
    assert metrics["reward/mean"] == pytest.approx(1.5)  # the mean of the four finite scores


def test_all_finite_rewards_make_the_estimators_own_call() -> None:
    rewards = torch.tensor([1.0, 2.0, 4.0, 8.0])
    groups = torch.tensor([0, 0, 1, 1])
    assert torch.equal(finite_only(GroupCentred(), rewards, groups), GroupCentred()(rewards, groups))


def test_the_loss_sees_a_non_finite_reward_as_its_groups_finite_mean() -> None:
    total = np.array([1.0, np.nan, 3.0, np.nan, np.nan])
    assert neutral_nonfinite(total, [0, 0, 0, 1, 1]).tolist() == [1.0, 2.0, 3.0, 0.0, 0.0]


def test_combined_reward_counts_non_finite_scores_per_reward() -> None:
    combined = CombinedReward([], None)
    combined.sections, combined.names = [_Section()], ["half_nan"]
    combined.models = [lambda images, prompts, metadata: np.array([0.5, np.nan, np.inf, 1.0])]
    batch = combined(np.zeros((4, 2, 2, 3), dtype=np.uint8), ["a"] * 4, [{}] * 4)
    assert batch.nonfinite == {"half_nan": 2}
    assert batch.metrics()["reward/half_nan/mean"] == pytest.approx(0.75)


class _Section:
    """The parts of a ``[[reward]]`` section CombinedReward reads."""

    name = "half_nan"
    weight = 1.0
    on_error = "raise"
    resources: ClassVar[dict[str, float]] = {}


def test_a_raising_reward_stops_the_run_with_the_resume_command(tmp_path: Path) -> None:
    from omni_rl import load_config
    from omni_rl.train.trainer import Trainer

    example = Path(__file__).parents[3] / "docs" / "examples" / "sd3_tiny_jpeg.toml"
    trainer = Trainer(load_config(example, [f"run.output_dir={tmp_path}", f"model.options.path={tmp_path / 'x'}"]))
    step_2 = checkpoint.checkpoints_dir(tmp_path) / "step_2"
    step_2.mkdir(parents=True)
    checkpoint.write_json(step_2 / "trainer_state.json", {"step": 2})

    def raising(images, prompts, metadata):
        raise OSError("scorer weights unreadable")

    trainer.rewards.models = [raising]
    with pytest.raises(RuntimeFailure) as info:
        trainer._score(np.zeros((2, 2, 2, 3), dtype=np.uint8), [], ["a", "b"], tmp_path)
    text = str(info.value)
    assert "failed: OSError: scorer weights unreadable" in text
    assert "--set run.resume=auto" in text
