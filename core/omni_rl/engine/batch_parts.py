"""Joining and cutting rollout batches: a policy worker's shard of a step's batch is taken from the parts the rollout
workers sampled (``[cluster] rollout_workers > 0``), by the positions of the samples in the step's request."""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import torch

from omni_rl.batch import Conditioning, RolloutBatch, Trajectory
from omni_rl.engine.trajectory import STEP_FIELDS

#: every per-sample tensor of a Trajectory: the per-step fields (N, W, ...) and sigma_max (N,)
_TRAJECTORY_TENSORS = (*STEP_FIELDS, "sigma_max")


def concat(parts: Sequence[RolloutBatch]) -> RolloutBatch:
    """The samples of ``parts`` in order (one part is returned as it is)."""
    if len(parts) == 1:
        return parts[0]
    trajectories = [p.trajectory for p in parts]
    trajectory = None
    if all(t is not None for t in trajectories):
        first = trajectories[0]
        assert first is not None
        joined = {name: torch.cat([getattr(t, name) for t in trajectories]) for name in _TRAJECTORY_TENSORS}
        trajectory = Trajectory(**joined, guidance_scale=first.guidance_scale)
    return RolloutBatch(
        prompts=[q for p in parts for q in p.prompts],
        group_ids=torch.cat([p.group_ids for p in parts]),
        seeds=torch.cat([p.seeds for p in parts]),
        images=torch.cat([p.images for p in parts]),
        final_latents=torch.cat([p.final_latents for p in parts]),
        conditioning=Conditioning.concat([p.conditioning for p in parts]),
        trajectory=trajectory,
        metadata=[m for p in parts for m in p.metadata],
    )


def select(batch: RolloutBatch, positions: Sequence[int]) -> RolloutBatch:
    """The samples at ``positions`` (indices into ``batch``), in that order."""
    if list(positions) == list(range(len(batch))):
        return batch
    idx = torch.as_tensor(list(positions), dtype=torch.long)
    trajectory = batch.trajectory
    if trajectory is not None:
        trajectory = attrs.evolve(trajectory, **{n: getattr(trajectory, n)[idx] for n in _TRAJECTORY_TENSORS})
    return RolloutBatch(
        prompts=[batch.prompts[i] for i in positions],
        group_ids=batch.group_ids[idx],
        seeds=batch.seeds[idx],
        images=batch.images[idx],
        final_latents=batch.final_latents[idx],
        conditioning=batch.conditioning.index(idx),
        trajectory=trajectory,
        metadata=[batch.metadata[i] for i in positions] if batch.metadata else [],
    )
