"""The micro-batch record: what one micro-batch of the update needs, cut from host records in one place.

The rollout batch, the advantages, the extras and the old views wait on the host (docs/placement.md); the update
takes one micro-batch of them at a time with :func:`trajectory_micro_batch` or :func:`forward_micro_batch` and
moves the whole record to the device with one :func:`omni_rl.engine.placement.to_device` call.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs
import torch

from omni_rl.batch import Conditioning, RolloutBatch


@attrs.define
class TrajectoryMicroBatch:
    """Samples ``idx`` of a recorded trajectory and everything the trajectory update reads for them. Per-step
    fields are (B, W, ...): column j is window step j."""

    latents: torch.Tensor
    next_latents: torch.Tensor
    sigmas: torch.Tensor
    next_sigmas: torch.Tensor
    sigma_max: torch.Tensor
    step_indices: torch.Tensor
    conditioning: Conditioning
    #: the advantages (B,) and the loss's per-sample extras; None while recomputing the old views
    advantages: torch.Tensor | None = None
    extras: dict[str, torch.Tensor] = attrs.field(factory=dict)
    #: the old policy's log-probs (B, W), and its steps' means and stds when the loss reads the old view
    old_log_probs: torch.Tensor | None = None
    old_mean: torch.Tensor | None = None
    old_std: torch.Tensor | None = None
    #: the rollout correction's per-element loss weights (B, W), None = every weight 1
    weights: torch.Tensor | None = None

    def __len__(self) -> int:
        return int(self.latents.shape[0])


def trajectory_micro_batch(
    batch: RolloutBatch,
    idx: torch.Tensor,
    *,
    advantages: torch.Tensor | None = None,
    extras: Mapping[str, torch.Tensor] | None = None,
    old_log_probs: torch.Tensor | None = None,
    old_steps: Mapping[str, torch.Tensor] | None = None,
    weights: torch.Tensor | None = None,
) -> TrajectoryMicroBatch:
    """Samples ``idx`` of the host records, still on the host."""
    traj = batch.trajectory
    if traj is None:
        raise RuntimeError("the rollout recorded no trajectory but the loss needs per-step log-probs")
    old_steps = old_steps or {}
    return TrajectoryMicroBatch(
        latents=traj.latents[idx],
        next_latents=traj.next_latents[idx],
        sigmas=traj.sigmas[idx],
        next_sigmas=traj.next_sigmas[idx],
        sigma_max=traj.sigma_max[idx],
        step_indices=traj.step_indices[idx],
        conditioning=batch.conditioning.index(idx),
        advantages=None if advantages is None else advantages[idx],
        extras={k: v[idx] for k, v in (extras or {}).items()},
        old_log_probs=None if old_log_probs is None else old_log_probs[idx],
        old_mean=old_steps["mean"][idx] if "mean" in old_steps else None,
        old_std=old_steps["std_dev_t"][idx] if "std_dev_t" in old_steps else None,
        weights=None if weights is None else weights[idx],
    )


@attrs.define
class ForwardMicroBatch:
    """Samples ``idx`` of a rollout batch for a forward-process loss (DPO, DiffusionNFT, AWM)."""

    x0: torch.Tensor
    advantages: torch.Tensor
    rewards: torch.Tensor
    group_ids: torch.Tensor
    conditioning: Conditioning
    extras: dict[str, torch.Tensor] = attrs.field(factory=dict)


def forward_micro_batch(
    batch: RolloutBatch,
    idx: torch.Tensor,
    *,
    advantages: torch.Tensor,
    rewards: torch.Tensor,
    extras: Mapping[str, torch.Tensor],
) -> ForwardMicroBatch:
    """Samples ``idx`` of the host records, still on the host."""
    return ForwardMicroBatch(
        x0=batch.final_latents[idx],
        advantages=advantages[idx],
        rewards=rewards[idx],
        group_ids=batch.group_ids[idx],
        conditioning=batch.conditioning.index(idx),
        extras={k: v[idx] for k, v in extras.items()},
    )
