"""Per-timestep metrics: a loss says how many samples a metric averages (``LossOutput.metric_counts``), the
driver's merge weights by exactly those, and the trajectory update hands the loss each sample's schedule step
(``TrajectoryLossInputs.step_indices``) even when one window column mixes steps across samples."""

from __future__ import annotations

import math

import torch
from core_toys import ToyModel, ToyModelConfig, ToyRollout, ToyRolloutConfig, ToySampler, ToySamplerConfig

from omni_rl.batch import LossOutput, TrajectoryLossInputs
from omni_rl.config.schema import OptimConfig
from omni_rl.engine.stepping import UpdateStats, merge_stats
from omni_rl.engine.trajectory_update import TrajectoryUpdate
from omni_rl.protocols import LossRequirements, RolloutRequest


def test_a_metric_of_a_subset_is_weighted_by_its_own_count() -> None:
    """Two workers, three calls. "r/step_3" is the mean over exactly the samples at step 3 wherever they fell:
    worker 0 saw one at 0.5 (of a call of 4), worker 1 saw three at 0.9 (one call) and none in another call
    whose value is NaN (no sample: left out, not 0 · NaN)."""
    first, second = UpdateStats(), UpdateStats()
    first.add_loss(1.0, 0.5, {"r": 2.0, "r/step_3": 0.5}, 4, {"r/step_3": 1})
    second.add_loss(1.0, 0.5, {"r": 4.0, "r/step_3": 0.9}, 4, {"r/step_3": 3})
    second.add_loss(1.0, 0.5, {"r": 1.0, "r/step_3": float("nan")}, 2, {"r/step_3": 0})
    merged = merge_stats([first.to_dict(), second.to_dict()])
    assert math.isclose(merged["r/step_3"], (1 * 0.5 + 3 * 0.9) / 4)
    assert math.isclose(merged["r"], (4 * 2.0 + 4 * 4.0 + 2 * 1.0) / 10)  # no count given: all of a call's


def test_without_counts_every_metric_covers_the_calls_samples() -> None:
    stats = UpdateStats()
    stats.add_loss(0.0, 1.0, {"a": 1.0}, 3)
    stats.add_loss(0.0, 1.0, {"a": 3.0}, 1, {})
    assert merge_stats([stats.to_dict()])["a"] == (3 * 1.0 + 1 * 3.0) / 4


class _StepRecorder:
    """Records each call's step indices and reports the mean advantage per schedule step with its count."""

    requirements = LossRequirements(inputs="trajectory", views=frozenset({"current"}))

    def __init__(self) -> None:
        self.seen: list[tuple[list[int], list[float]]] = []

    def prepare(self, rewards: torch.Tensor, advantages: torch.Tensor, group_ids: torch.Tensor) -> dict:
        return {}

    def __call__(self, inputs: TrajectoryLossInputs) -> LossOutput:
        assert inputs.step_indices is not None
        steps = inputs.step_indices
        self.seen.append((steps.tolist(), inputs.advantages.tolist()))
        metrics, counts = {}, {}
        for j in steps.unique().tolist():
            at = steps == j
            metrics[f"adv/step_{j}"] = float(inputs.advantages[at].mean())
            counts[f"adv/step_{j}"] = int(at.sum())
        loss = (inputs.current.log_prob * 0).sum()
        return LossOutput(loss=loss, metrics=metrics, metric_counts=counts)


def test_the_update_passes_each_samples_schedule_step() -> None:
    """A window of 2 columns whose steps differ per sample (as DanceGRPO's timestep_fraction can make them):
    the loss receives traj.step_indices[idx, j], and the merged per-step metric is the mean over the (sample,
    column) pairs at that step, whatever the micro-batching."""
    model = ToyModel(ToyModelConfig(channels=4))
    sampler = ToySampler(ToySamplerConfig(window=2))
    request = RolloutRequest(prompts=["a", "a", "b", "b"], group_ids=[0, 0, 1, 1], seeds=[1, 2, 3, 4], step=1)
    batch = ToyRollout(ToyRolloutConfig()).generate(model, sampler, request)
    assert batch.trajectory is not None
    mixed = torch.tensor([[2, 3], [2, 5], [4, 3], [7, 5]])
    batch.trajectory.step_indices = mixed
    advantages = torch.tensor([1.0, 2.0, 4.0, 8.0])
    loss = _StepRecorder()
    optimizer = torch.optim.SGD(model.trainable_parameters(), lr=0.0)
    engine = TrajectoryUpdate(model, sampler, loss, optimizer, OptimConfig(micro_batch=3, mini_batch=4))
    stats = engine.run(batch, advantages, {}, generator=torch.Generator().manual_seed(0))
    pairs = sorted((j, a) for steps, advs in loss.seen for j, a in zip(steps, advs, strict=True))
    expected = sorted((int(mixed[i, c]), float(advantages[i])) for i in range(4) for c in range(2))
    assert pairs == expected
    merged = merge_stats([stats])
    assert merged["adv/step_2"] == (1.0 + 2.0) / 2
    assert merged["adv/step_3"] == (1.0 + 4.0) / 2
    assert merged["adv/step_5"] == (2.0 + 8.0) / 2
    assert merged["adv/step_4"] == 4.0 and merged["adv/step_7"] == 8.0
