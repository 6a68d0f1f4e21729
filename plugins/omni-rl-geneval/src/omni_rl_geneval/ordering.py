"""The order in which GenEval takes one class's detections: highest confidence first, ties as its numpy orders them.

GenEval sorts a class's float32 confidences with numpy's default ``argsort`` and reverses the result. That sort
is an introsort, not a stable sort, so which of two equally confident detections comes first (the one counted,
colour-checked, position-checked and kept by NMS) depends on the sort itself. GenEval pins numpy 1.23, whose
argsort of float32 is the plain C introsort (the SIMD argsorts of later numpy versions order ties otherwise), so
that algorithm is re-implemented here, in Python, to give GenEval's order whatever numpy is installed:

- the whole range is partitioned while it holds more than 16 elements: pivot = the median of the first, middle
  and last element (those three are sorted in place first), parked next to the last; two cursors move inwards,
  each stopping at an element equal to the pivot; the smaller side is sorted next and the larger one waits
  on a stack;
- ranges of at most 16 elements are insertion-sorted (stable: with no more than 16 detections of a class,
  a tie keeps the detections' order, so the reversed result puts the later one first);
- a range taken from the stack after more than 2 * floor(log2 n) partitions is heap-sorted instead;
- NaN sorts after every number.

For n <= 16 and distinct values every sort agrees; the tests compare ties of longer lists with orders numpy 1.23.5
printed.
"""

from __future__ import annotations

from collections.abc import Sequence

#: a range longer than this (in elements - 1) is partitioned, a shorter one insertion-sorted
_SMALL = 15


def _less(a: float, b: float) -> bool:
    """numpy's order of floats: NaN after every number (and equal to NaN)."""
    return a < b or (b != b and a == a)


def numpy_argsort(values: Sequence[float]) -> list[int]:
    """The indices numpy 1.23's ``np.argsort(values)`` (default ``kind="quicksort"``) returns for float32 values."""
    v = [float(x) for x in values]
    order = list(range(len(v)))
    stack: list[tuple[int, int, int]] = []
    lo, hi, depth = 0, len(v) - 1, 2 * max(len(v).bit_length() - 1, 0)
    while True:
        if depth < 0:
            _heapsort(v, order, lo, hi)
        else:
            while hi - lo > _SMALL:
                split = _partition(v, order, lo, hi)
                depth -= 1
                if split - lo < hi - split:
                    stack.append((split + 1, hi, depth))
                    hi = split - 1
                else:
                    stack.append((lo, split - 1, depth))
                    lo = split + 1
            _insertion_sort(v, order, lo, hi)
        if not stack:
            return order
        lo, hi, depth = stack.pop()


def descending(values: Sequence[float]) -> list[int]:
    """GenEval's order of a class's detections: ``numpy_argsort`` reversed."""
    return numpy_argsort(values)[::-1]


def _partition(v: list[float], order: list[int], lo: int, hi: int) -> int:
    """One median-of-three partition of ``order[lo..hi]``; returns where the pivot ends."""
    mid = lo + ((hi - lo) >> 1)
    if _less(v[order[mid]], v[order[lo]]):
        order[mid], order[lo] = order[lo], order[mid]
    if _less(v[order[hi]], v[order[mid]]):
        order[hi], order[mid] = order[mid], order[hi]
    if _less(v[order[mid]], v[order[lo]]):
        order[mid], order[lo] = order[lo], order[mid]
    pivot = v[order[mid]]
    left, right = lo, hi - 1
    order[mid], order[right] = order[right], order[mid]
    while True:
        left += 1
        while _less(v[order[left]], pivot):
            left += 1
        right -= 1
        while _less(pivot, v[order[right]]):
            right -= 1
        if left >= right:
            break
        order[left], order[right] = order[right], order[left]
    order[left], order[hi - 1] = order[hi - 1], order[left]
    return left


def _insertion_sort(v: list[float], order: list[int], lo: int, hi: int) -> None:
    for i in range(lo + 1, hi + 1):
        moving, j = order[i], i
        while j > lo and _less(v[moving], v[order[j - 1]]):
            order[j] = order[j - 1]
            j -= 1
        order[j] = moving


def _heapsort(v: list[float], order: list[int], lo: int, hi: int) -> None:
    """Heap sort of ``order[lo..hi]`` (1-based heap positions: position k is ``order[lo + k - 1]``)."""
    n = hi - lo + 1

    def sift(start: int, size: int, moving: int) -> None:
        i, j = start, 2 * start
        while j <= size:
            if j < size and _less(v[order[lo + j - 1]], v[order[lo + j]]):
                j += 1
            if not _less(v[moving], v[order[lo + j - 1]]):
                break
            order[lo + i - 1] = order[lo + j - 1]
            i, j = j, 2 * j
        order[lo + i - 1] = moving

    for start in range(n >> 1, 0, -1):
        sift(start, n, order[lo + start - 1])
    while n > 1:
        last = order[lo + n - 1]
        order[lo + n - 1] = order[lo]
        n -= 1
        sift(1, n, last)
