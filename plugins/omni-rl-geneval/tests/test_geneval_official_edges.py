"""The edges where a re-reading of GenEval's rules and GenEval's code (``evaluation/evaluate_images.py``, numpy 1.23,
float32 detector output) part: confidences equal to the float32 threshold and one ulp either side, boxes whose
pixel-inclusive IoU equals the NMS threshold and one ulp either side, the step order threshold -> cap -> NMS,
equal confidences, a relation exactly on its 0.5 boundary, and GenEval's reason texts. Every expected value is
computed by hand in the comments (no second implementation of the rules)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from omni_rl_geneval.rules import Detection, Thresholds, evaluate, iou, keep, keep_all, relation

F32_03 = float(np.float32(0.3))  # 0.30000001192092896: 0.3 as GenEval's float32 comparison sees it
F32_09 = float(np.float32(0.9))  # 0.8999999761581421


def up(x: float) -> float:
    return float(np.nextafter(np.float32(x), np.float32(2)))


def down(x: float) -> float:
    return float(np.nextafter(np.float32(x), np.float32(-1)))


def det(x0: float, y0: float, x1: float, y1: float, score: float = 0.95) -> Detection:
    return Detection(box=(x0, y0, x1, y1), score=score)


def scores_kept(scores: Sequence[float], confidence: float = 0.3) -> list[float]:
    found = [det(10 * i, 0, 10 * i + 5, 5, s) for i, s in enumerate(scores)]
    return [d.score for d in keep(found, confidence=confidence, limits=Thresholds())]


# -- confidences: float32(score) > float32(threshold) ----------------------------------------------------------


@pytest.mark.parametrize(
    ("score", "kept"),
    [
        (F32_03, False),  # equal to the threshold's float32 value: not above it
        (0.3, False),  # the float64 0.3 is that same float32
        (0.30000001, False),  # above 0.3 in float64, but rounds to float32(0.3)
        (up(0.3), True),  # one float32 ulp above
        (down(0.3), False),  # one float32 ulp below
        (float("nan"), False),
    ],
)
def test_a_confidence_is_compared_as_float32(score: float, kept: bool) -> None:
    assert scores_kept([score]) == ([score] if kept else [])


@pytest.mark.parametrize(
    ("score", "kept"), [(F32_09, False), (0.9, False), (0.9000000001, False), (up(0.9), True), (down(0.9), False)]
)
def test_the_counting_threshold_is_compared_as_float32(score: float, kept: bool) -> None:
    found = {"clock": [det(0, 0, 5, 5, score)]}
    assert ("clock" in keep_all(found, "counting", Thresholds())) is kept
    assert "clock" in keep_all(found, "two_object", Thresholds())  # 0.3 for every other tag


# -- NMS: pixel-inclusive IoU, dropped when >= max_overlap -----------------------------------------------------


def test_iou_counts_pixels_inclusively() -> None:
    # (0,0,9,9): 10 x 10 = 100 pixels; (0,0,9,4): 10 x 5 = 50, all inside: IoU = 50 / 100 exactly
    assert iou((0, 0, 9, 9), (0, 0, 9, 4)) == 0.5
    # boxes that only share the edge x = 10 overlap by a column of 1 x 11: IoU = 11 / (121 + 121 - 11)
    assert iou((0, 0, 10, 10), (10, 0, 20, 10)) == 11 / 231
    # half a pixel apart still overlap by 0.5 x 11 = 5.5 of 121 + 10.5 x 11 = 115.5: IoU = 5.5 / 231
    assert iou((0, 0, 10, 10), (10.5, 0, 20, 10)) == 5.5 / 231
    # two pixels apart: the overlap's width 10 - 12 + 1 = -1 clamps to 0
    assert iou((0, 0, 10, 10), (12, 0, 20, 10)) == 0.0
    # coordinates are float32: 2**24 + 1 is read as 2**24, so these boxes are the same box
    assert iou((0, 0, 2**24 + 1, 9), (0, 0, 2**24, 9)) == 1.0


@pytest.mark.parametrize(
    ("max_overlap", "both_kept"),
    [(0.5, False), (float(np.nextafter(0.5, 1.0)), True), (float(np.nextafter(0.5, 0.0)), False), (1.0, True)],
)
def test_a_box_whose_iou_equals_max_overlap_is_dropped(max_overlap: float, both_kept: bool) -> None:
    strong, weak = det(0, 0, 9, 9, 0.9), det(0, 0, 9, 4, 0.8)  # IoU exactly 0.5 (above)
    kept = keep([weak, strong], confidence=0.3, limits=Thresholds(nms_threshold=max_overlap))
    assert kept == ([strong, weak] if both_kept else [strong])


def test_nms_merges_what_an_exclusive_iou_would_keep() -> None:
    """(0,0,10,10) and (1,0,11,10): inclusive IoU 110 / 132 = 0.833, exclusive 90 / 110 = 0.818. At
    max_overlap 0.83 GenEval drops the second box, so a count of two becomes one."""
    a, b = det(0, 0, 10, 10, 0.9), det(1, 0, 11, 10, 0.8)
    limits = Thresholds(nms_threshold=0.83)
    assert keep([a, b], confidence=0.3, limits=limits) == [a]
    two = {"tag": "counting", "include": [{"class": "cat", "count": 2}]}
    kept = keep_all({"cat": [det(*a.box, 0.95), det(*b.box, 0.94)]}, "counting", limits)
    assert evaluate(two, kept, lambda name, ds: []).reasons == ("expected cat>=2, found 1",)


def test_nms_is_greedy_from_the_most_confident() -> None:
    """a suppresses b (IoU 110/132); c overlaps b (110/132) but not a (x 2..12 vs 0..10: 9 x 11 = 99 of
    121 + 121 - 99 = 143, 0.69 < 0.8), and b, dropped, suppresses nothing: a and c are kept."""
    a, b, c = det(0, 0, 10, 10, 0.9), det(1, 0, 11, 10, 0.8), det(2, 0, 12, 10, 0.7)
    assert iou(a.box, c.box) == 99 / 143
    assert keep([c, b, a], confidence=0.3, limits=Thresholds(nms_threshold=0.8)) == [a, c]


def test_the_cap_comes_before_nms() -> None:
    """Three boxes, max_objects 2: the cap keeps a and b, NMS then drops b; c was cut by the cap already."""
    a, b, c = det(0, 0, 10, 10, 0.9), det(1, 0, 11, 10, 0.8), det(50, 50, 60, 60, 0.7)
    assert keep([a, b, c], confidence=0.3, limits=Thresholds(max_objects=2, nms_threshold=0.5)) == [a]
    assert keep([a, b, c], confidence=0.3, limits=Thresholds(max_objects=3, nms_threshold=0.5)) == [a, c]


def test_the_threshold_comes_before_the_cap() -> None:
    """max_objects counts kept confidences only: 0.2 and 0.25 do not take places of the 16."""
    assert len(scores_kept([0.2, 0.25] + [0.5] * 20)) == 16


def test_max_overlap_above_one_keeps_every_box() -> None:
    a, b = det(0, 0, 10, 10, 0.9), det(0, 0, 10, 10, 0.8)  # identical boxes: IoU 1, never < 1, never < 1.5 either
    assert keep([a, b], confidence=0.3, limits=Thresholds(nms_threshold=1.5)) == [a, b]
    assert keep([a, b], confidence=0.3, limits=Thresholds(nms_threshold=0.999)) == [a]


# -- equal confidences ---------------------------------------------------------------------------------------


def test_equal_confidences_put_the_later_detection_first() -> None:
    """numpy's argsort insertion-sorts up to 16 values (stable), and GenEval reverses it: of two cars of equal
    confidence the later one is the 'top' one, whose colour is checked."""
    first, second = det(0, 0, 5, 5, 0.8), det(20, 0, 25, 5, 0.8)
    red_car = {"tag": "colors", "include": [{"class": "car", "count": 1, "color": "red"}]}
    colours = {id(first): "red", id(second): "blue"}
    kept = keep_all({"car": [first, second]}, "colors", Thresholds())
    assert kept["car"] == [second, first]
    verdict = evaluate(red_car, kept, lambda name, ds: [colours[id(d)] for d in ds])
    assert verdict.reasons == ("expected red car>=1, found 0 red; and 1 blue",)


def test_twenty_equal_confidences_in_numpy_1_23_order() -> None:
    """Past 16 values the sort partitions, and equal values leave it in an order numpy 1.23.5 printed."""
    found = [det(10 * i, 0, 10 * i + 5, 5, 0.5) for i in range(20)]
    kept = keep(found, confidence=0.3, limits=Thresholds(max_objects=20))
    assert [found.index(d) for d in kept] == [19, 18, *range(1, 18), 0]


# -- position: float32, strict 0.5 ---------------------------------------------------------------------------


def test_a_relation_exactly_at_half_is_not_taken() -> None:
    """A = (0.5, 4, 5.5, 4) is 5 wide and 0 high, centred (3, 4); B = (0, 0, 0, 0). Offset (3, 4), length 5;
    shrunk: x 3 - 0.1 * 5 = 2.5, y 4 - 0 = 4; dx = 0.5 (not > 0.5), dy = 0.8: below only. With a margin just
    under 0.1, dx passes 0.5 and A is right of B as well."""
    a, b = det(0.5, 4, 5.5, 4), det(0, 0, 0, 0)
    assert relation(a, b, 0.1) == {"below"}
    assert relation(a, b, 0.0999) == {"below", "right of"}


def test_sizes_are_absolute_and_centres_are_midpoints() -> None:
    """A box given as (x1, y1, x0, y0) has the same centre and size |x1 - x0|: GenEval takes abs() of the sides.
    A = (60, 10, 50, 0): centre (55, 5), size 10 x 10; B = (0, 0, 10, 10): centre (5, 5). Offset (50, 0),
    shrunk 50 - 0.1 * 20 = 48: dx = 0.96, right of."""
    assert relation(det(60, 10, 50, 0), det(0, 0, 10, 10)) == {"right of"}


# -- reasons ---------------------------------------------------------------------------------------------------


def test_reasons_are_genevals_texts() -> None:
    metadata = {
        "tag": "position",
        "include": [
            {"class": "dog", "count": 1},
            {"class": "cat", "count": 2, "color": "white", "position": ["left of", 0]},
        ],
        "exclude": [{"class": "cow", "count": 1}],
    }
    dog, cat1, cat2, cow = det(50, 0, 60, 10), det(0, 0, 10, 10, 0.9), det(0, 50, 10, 60, 0.8), det(90, 90, 99, 99)
    colours = {id(cat1): "white", id(cat2): "red"}
    verdict = evaluate(
        metadata, {"dog": [dog], "cat": [cat1, cat2], "cow": [cow]}, lambda n, ds: [colours[id(d)] for d in ds]
    )
    # the colour counts are listed in GenEval's colour order (red before white), the lines joined by newlines
    assert verdict.reason == "expected white cat>=2, found 1 white; and 1 red, 1 white\nexpected cow<1, found 1"
    colours[id(cat2)] = "white"
    below = det(50, 50, 60, 60, 0.8)  # centre (55, 55) under the dog's (55, 5): offset (0, 50), dy = 48 / 50
    colours[id(below)] = "white"
    moved = evaluate(metadata, {"dog": [dog], "cat": [cat1, below]}, lambda n, ds: [colours[id(d)] for d in ds])
    assert moved.reasons == ("expected cat left of target, found below target",)
