"""Keep only the window steps each sample trains (DanceGRPO's ``timestep_fraction``, docs/math.md#timestep-fraction).

A training rollout records its whole SDE window, W steps per sample. A sampler with the optional
``trained_positions(window_len, step, run_seed, sample_seed)`` member names, per sample, the K window positions it
trains (K = ceil(f·W) for every sample); the policy worker calls :func:`keep_trained_steps` right after the rollout
so the update trains K columns per sample: its loop over window columns needs no change, and a column may then
hold different schedule steps for different samples (``Trajectory.step_indices`` says which, per sample).

The draw is keyed by (run seed, training step, sample seed), so it is the same on every worker and after a
resume. Core code only: it calls the member if the sampler has it and never imports a plugin.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import torch

from omni_rl.batch import RolloutBatch, Trajectory

#: the per-step fields of a Trajectory, each shaped (N, W, ...)
STEP_FIELDS: tuple[str, ...] = ("latents", "next_latents", "sigmas", "next_sigmas", "log_probs", "step_indices")


def keep_trained_steps(batch: RolloutBatch, sampler: Any, step: int, run_seed: int) -> RolloutBatch:
    """``batch`` with only each sample's trained window columns, or ``batch`` itself when the sampler trains the
    whole window (no ``trained_positions`` member, no trajectory, or every position kept)."""
    trajectory = batch.trajectory
    pick = getattr(sampler, "trained_positions", None)
    if pick is None or trajectory is None:
        return batch
    window_len = int(trajectory.log_probs.shape[1])
    positions = [list(pick(window_len, step, run_seed, int(seed))) for seed in batch.seeds.tolist()]
    if all(p == list(range(window_len)) for p in positions):
        return batch
    return attrs.evolve(batch, trajectory=select_columns(trajectory, positions))


def select_columns(trajectory: Trajectory, positions: Sequence[Sequence[int]]) -> Trajectory:
    """Sample i keeps window columns ``positions[i]`` (in that order) of every per-step field: (N, W, ...) becomes
    (N, K, ...). Every sample must keep the same number K >= 1 of distinct, in-range columns."""
    n, window_len = (int(d) for d in trajectory.log_probs.shape[:2])
    counts = {len(p) for p in positions}
    if len(positions) != n or len(counts) != 1 or counts == {0}:
        raise ValueError(
            f"trained_positions must give every one of the {n} samples the same number (>= 1) of window steps, got "
            f"{len(positions)} lists of lengths {sorted(counts)}"
        )
    for i, chosen in enumerate(positions):
        if len(set(chosen)) != len(chosen) or not all(0 <= p < window_len for p in chosen):
            raise ValueError(
                f"trained_positions of sample {i} must be distinct positions in 0 … {window_len - 1}, "
                f"got {list(chosen)}"
            )
    index = torch.as_tensor([list(p) for p in positions], dtype=torch.long)
    rows = torch.arange(n).unsqueeze(1)
    kept = {}
    for name in STEP_FIELDS:
        field = getattr(trajectory, name)
        kept[name] = field[rows.to(field.device), index.to(field.device)]
    return attrs.evolve(trajectory, **kept)
