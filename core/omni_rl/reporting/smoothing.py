"""Smoothing for reward curves: the train reward of one step is the mean of a few groups and jumps by more than
what training changes, so plots draw it faint and an exponential moving average over it.
"""

from __future__ import annotations

from collections.abc import Sequence

#: weight of the previous average at each step (TensorBoard's slider; 0.9 ≈ the last 10 steps)
DEFAULT_EMA = 0.9


def ema(values: Sequence[float], factor: float = DEFAULT_EMA) -> list[float]:
    """Debiased exponential moving average (as TensorBoard's smoothing): the first points are not pulled to 0."""
    if not 0.0 <= factor < 1.0:
        raise ValueError(f"the EMA factor must be in [0, 1), got {factor}")
    out: list[float] = []
    average, weight = 0.0, 0.0
    for value in values:
        average = factor * average + (1 - factor) * value
        weight = factor * weight + (1 - factor)
        out.append(average / weight)
    return out
