"""timestep_fraction in the loop (omni_rl.engine.trajectory): after a training rollout the policy worker keeps only
each sample's trained window columns, so the update trains K of the W recorded steps per sample.

The sampler here is the core toy with a ``trained_positions`` member added (core tests import no plugin): sample
seed s trains positions {s % W, (s + 1) % W} in ascending order, an easy rule to compute by hand.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest
import torch
from core_toys import ToyLoss, ToyLossConfig, ToyModel, ToyModelConfig, ToyRollout, ToyRolloutConfig, ToySampler
from core_toys import ToySamplerConfig as SamplerConfig

from omni_rl.batch import LossOutput, RolloutBatch, Trajectory, TrajectoryLossInputs
from omni_rl.config.schema import OptimConfig
from omni_rl.engine.profiling import StepProfiler
from omni_rl.engine.trajectory import STEP_FIELDS, keep_trained_steps, select_columns
from omni_rl.engine.trajectory_update import TrajectoryUpdate
from omni_rl.protocols import LossRequirements, RolloutRequest
from omni_rl.runtime.worker import PolicyWorker

N, W = 4, 3


class SubsetSampler(ToySampler):
    """The toy sampler, training two of the window's steps per sample (and recording how it was asked)."""

    def __init__(self, config: SamplerConfig) -> None:
        super().__init__(config)
        self.calls: list[tuple[int, int, int, int]] = []

    def trained_positions(self, window_len: int, step: int, run_seed: int, sample_seed: int) -> list[int]:
        self.calls.append((window_len, step, run_seed, sample_seed))
        return sorted({sample_seed % window_len, (sample_seed + 1) % window_len})


def _trajectory() -> Trajectory:
    """Entries that name their own (sample, column): x[i, j] is filled with 10 i + j."""
    tag = (10 * torch.arange(N).unsqueeze(1) + torch.arange(W)).float()  # (N, W)
    return Trajectory(
        latents=tag.view(N, W, 1, 1, 1).expand(N, W, 2, 2, 2).clone(),
        next_latents=(tag + 0.5).view(N, W, 1, 1, 1).expand(N, W, 2, 2, 2).clone(),
        sigmas=tag / 100,
        next_sigmas=tag / 100 + 0.001,
        log_probs=-tag,
        sigma_max=torch.full((N,), 0.9),
        step_indices=torch.arange(2, 2 + W).expand(N, W).clone(),
        guidance_scale=4.5,
    )


def _batch(seeds: list[int]) -> RolloutBatch:
    return RolloutBatch(
        prompts=["p"] * N,
        group_ids=torch.zeros(N, dtype=torch.long),
        seeds=torch.tensor(seeds),
        images=torch.zeros(N, 8, 8, 3, dtype=torch.uint8),
        final_latents=torch.zeros(N, 2, 2, 2),
        conditioning=None,  # type: ignore[arg-type]
        trajectory=_trajectory(),
    )


def test_select_columns_gathers_each_samples_own_positions() -> None:
    traj = _trajectory()
    positions = [[0, 2], [1, 2], [0, 1], [2, 0]]
    kept = select_columns(traj, positions)
    for name in STEP_FIELDS:
        assert getattr(kept, name).shape == (N, 2, *getattr(traj, name).shape[2:]), name
    for i, chosen in enumerate(positions):
        for k, j in enumerate(chosen):
            assert kept.log_probs[i, k].item() == -(10 * i + j)
            assert torch.equal(kept.latents[i, k], traj.latents[i, j])
            assert torch.equal(kept.next_latents[i, k], traj.next_latents[i, j])
            assert kept.sigmas[i, k].item() == traj.sigmas[i, j].item()
            assert kept.next_sigmas[i, k].item() == traj.next_sigmas[i, j].item()
            assert kept.step_indices[i, k].item() == 2 + j
    assert torch.equal(kept.sigma_max, traj.sigma_max) and kept.guidance_scale == 4.5


@pytest.mark.parametrize(
    ("positions", "message"),
    [
        ([[0], [1], [2]], "same number"),  # one list short
        ([[0, 1], [1], [2, 0], [1, 2]], "same number"),
        ([[], [], [], []], "same number"),
        ([[0, 3], [0, 1], [0, 1], [0, 1]], "distinct positions in 0 … 2"),
        ([[1, 1], [0, 1], [0, 1], [0, 1]], "distinct positions"),
    ],
)
def test_select_columns_refuses_bad_positions(positions: list[list[int]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        select_columns(_trajectory(), positions)


def test_keep_trained_steps_asks_the_sampler_per_sample_seed() -> None:
    sampler = SubsetSampler(SamplerConfig())
    batch = _batch([7, 8, 9, 10])
    kept = keep_trained_steps(batch, sampler, step=5, run_seed=3)
    assert sampler.calls == [(W, 5, 3, s) for s in (7, 8, 9, 10)]
    assert kept.trajectory is not None
    expected = [[1, 2], [0, 2], [0, 1], [1, 2]]  # seed s: {s % 3, (s + 1) % 3}
    assert kept.trajectory.step_indices.tolist() == [[2 + j for j in row] for row in expected]
    assert batch.trajectory is not None and batch.trajectory.log_probs.shape == (N, W)  # the input is unchanged


def test_keep_trained_steps_is_a_no_op_without_the_member_or_a_trajectory() -> None:
    batch = _batch([1, 2, 3, 4])
    assert keep_trained_steps(batch, ToySampler(SamplerConfig()), 1, 0) is batch
    bare = attrs.evolve(batch, trajectory=None)
    assert keep_trained_steps(bare, SubsetSampler(SamplerConfig()), 1, 0) is bare


def test_keep_trained_steps_keeps_the_batch_when_every_step_is_trained() -> None:
    class Everything(ToySampler):
        def trained_positions(self, window_len: int, step: int, run_seed: int, sample_seed: int) -> list[int]:
            return list(range(window_len))

    batch = _batch([1, 2, 3, 4])
    assert keep_trained_steps(batch, Everything(SamplerConfig()), 1, 0) is batch


# -- through the policy worker and the update -------------------------------------------------------------


class RecordingLoss(ToyLoss):
    """The toy PPO loss, remembering which schedule step each call trained for each sample (named by its
    advantage, since the update shuffles the samples into mini-batches)."""

    requirements = LossRequirements(inputs="trajectory", views=frozenset({"current"}))

    def __init__(self) -> None:
        super().__init__(ToyLossConfig())
        self.calls = 0
        self.steps_of: dict[float, list[int]] = {}

    def __call__(self, inputs: TrajectoryLossInputs) -> LossOutput:
        assert inputs.step_indices is not None
        self.calls += 1
        for adv, j in zip(inputs.advantages.tolist(), inputs.step_indices.tolist(), strict=True):
            self.steps_of.setdefault(adv, []).append(j)
        return super().__call__(inputs)


def _worker(sampler: Any) -> PolicyWorker:
    """A PolicyWorker with toy parts, built without a config (rollout_shard only reads these attributes)."""
    worker = PolicyWorker.__new__(PolicyWorker)
    worker.model = ToyModel(ToyModelConfig())
    worker.sampler = sampler
    worker.rollout = ToyRollout(ToyRolloutConfig(steps=6, group_size=2))
    worker.loss = RecordingLoss()
    worker.requirements = worker.loss.requirements
    worker._batch = None
    worker.profiler = StepProfiler((), Path("unused"), "rank0")  # [log] profile_steps empty: traces nothing
    return worker


def test_the_worker_keeps_k_columns_and_the_update_trains_only_them() -> None:
    sampler = SubsetSampler(SamplerConfig(window=W))
    worker = _worker(sampler)
    seeds = [3, 4, 5, 6]
    request = RolloutRequest(prompts=["a", "a", "b", "b"], group_ids=[0, 0, 1, 1], seeds=seeds, step=2, run_seed=1)
    out = worker.rollout_shard(request)

    window = sampler.window(2, 6, 1)
    assert out.window == list(window)  # the logged window is the whole recorded one
    traj = worker._batch.trajectory
    expected = [[window[p] for p in sampler.trained_positions(W, 2, 1, s)] for s in seeds]
    assert traj.log_probs.shape == (N, 2) and traj.step_indices.tolist() == expected

    # the kept columns are the recorded steps themselves: re-scoring them gives the stored log-probs (ratio 1)
    loss = worker.loss
    model = worker.model
    engine = TrajectoryUpdate(
        model, sampler, loss, torch.optim.SGD(model.trainable_parameters(), lr=0.0), OptimConfig()
    )
    recomputed, _ = engine.old_views(worker._batch, keep_steps=False)
    torch.testing.assert_close(recomputed, traj.log_probs, rtol=0, atol=1e-6)

    advantages = [1.0, -1.0, 0.5, -0.5]
    engine.run(worker._batch, torch.tensor(advantages), {}, generator=torch.Generator().manual_seed(0))
    assert loss.calls == 2  # one call per kept column (one micro-batch of all 4 samples), not W = 3
    assert {adv: sorted(steps) for adv, steps in loss.steps_of.items()} == dict(zip(advantages, expected, strict=True))
