"""GenEval's order of equal confidences: numpy 1.23's argsort (an unstable introsort) reversed, re-implemented in
omni_rl_geneval.ordering. The expected orders below were printed by numpy 1.23.5 (``np.argsort(a).tolist()`` on
float32 arrays), the version GenEval's environment pins."""

from __future__ import annotations

import numpy as np
import pytest
from omni_rl_geneval.ordering import descending, numpy_argsort

MIXED = [0.9, 0.5, 0.5, 0.7, 0.5, 0.9, 0.5, 0.7, 0.5, 0.5, 0.9, 0.5, 0.7, 0.5, 0.5, 0.9, 0.5, 0.5, 0.7, 0.5, 0.5]
MIXED += [0.9, 0.5, 0.7]


@pytest.mark.parametrize(
    ("values", "numpy_1_23"),
    [
        ([0.5] * 16, list(range(16))),  # insertion sort: stable
        ([0.5] * 20, [0, *range(17, 0, -1), 18, 19]),  # partitioned: not stable
        (
            MIXED,
            [11, 1, 2, 20, 4, 19, 6, 8, 9, 17, 22, 16, 13, 14, 18, 23, 12, 7, 3, 10, 5, 21, 15, 0],
        ),
        ([0.5, float("nan"), 0.1, float("nan"), 0.5], [2, 0, 4, 1, 3]),  # NaN after every number
        ([], []),
        ([0.3], [0]),
    ],
)
def test_numpy_1_23_argsort(values: list[float], numpy_1_23: list[int]) -> None:
    assert numpy_argsort(np.asarray(values, dtype=np.float32).tolist()) == numpy_1_23


def test_descending_is_the_reversed_argsort() -> None:
    assert descending([0.5] * 20) == [19, 18, *range(1, 18), 0]
    assert descending([0.1, 0.9, 0.5]) == [1, 2, 0]


def test_distinct_values_sort_like_any_sort() -> None:
    values = np.random.default_rng(0).random(300).astype(np.float32)
    assert numpy_argsort(values.tolist()) == np.argsort(values, kind="stable").tolist()
