"""The old policy's decay schedules: old ← d·old + (1 − d)·θ, with d a function of the optimizer steps
taken (docs/math.md#diffusionnft-loss).

The three schedules are the reference's ``return_decay(step, decay_type)`` (NVlabs/DiffusionNFT,
``scripts/train_nft_sd3.py``): a flat stretch of ``d = 0`` (the old policy is a copy of the current one), then
``d`` rising linearly to a cap. ``step`` there is the global count of optimizer steps, which is what this module
takes, so a run with several optimizer steps per sampling round ramps as fast as the reference's does.
"""

from __future__ import annotations

from typing import NamedTuple


class DecaySchedule(NamedTuple):
    """d(i) = 0 for i < flat, else min(rate · (i − flat), cap)."""

    flat: int
    rate: float
    cap: float


#: the reference's decay_type 0, 1 and 2
SCHEDULES: dict[str, DecaySchedule] = {
    "copy": DecaySchedule(flat=0, rate=0.0, cap=0.0),
    "ramp": DecaySchedule(flat=0, rate=0.001, cap=0.5),
    "delayed_ramp": DecaySchedule(flat=75, rate=0.0075, cap=0.999),
}


def old_decay(schedule: str, update_index: int) -> float:
    """The decay d after ``update_index`` optimizer steps (0 copies the current policy into the old one)."""
    flat, rate, cap = SCHEDULES[schedule]
    if update_index < flat:
        return 0.0
    return min((update_index - flat) * rate, cap)
