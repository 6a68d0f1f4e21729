"""GenEval's rules on hand-built detections (no model): keep rules, every position relation and the
no-relation case, include / exclude logic, colour counting and the partial score, against hand-computed verdicts."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from omni_rl_geneval.rules import Detection, Thresholds, evaluate, iou, keep, keep_all, relation


def box(x0: float, y0: float, x1: float, y1: float, score: float = 0.95) -> Detection:
    return Detection(box=(x0, y0, x1, y1), score=score)


def at(cx: float, cy: float, size: float = 4.0, score: float = 0.95) -> Detection:
    """A square box of side ``size`` centred at (cx, cy)."""
    h = size / 2
    return box(cx - h, cy - h, cx + h, cy + h, score)


def given_colors(table: dict[int, str]):
    """A colour function answering from the detections' identities (colours given by hand)."""

    def colors(name: str, detections: Sequence[Detection]) -> list[str]:
        return [table[id(d)] for d in detections]

    return colors


def no_colors(name: str, detections: Sequence[Detection]) -> list[str]:
    raise AssertionError("no colour should be asked for")


# -- keep --------------------------------------------------------------------------------------------------


def test_keep_sorts_thresholds_strictly_and_caps() -> None:
    found = [box(0, 0, 1, 1, s) for s in (0.5, 0.95, 0.3, 0.2, 0.35)]
    kept = keep(found, confidence=0.3, limits=Thresholds())
    assert [d.score for d in kept] == [0.95, 0.5, 0.35]  # 0.3 itself is not above 0.3
    many = [box(i, 0, i + 1, 1, 0.5 + i / 100) for i in range(20)]
    capped = keep(many, confidence=0.3, limits=Thresholds())
    assert len(capped) == 16 and capped[0].score == pytest.approx(0.69)
    assert len(keep(many, confidence=0.3, limits=Thresholds(max_objects=3))) == 3


def test_counting_prompts_use_the_higher_threshold() -> None:
    found = {"cat": [box(0, 0, 1, 1, 0.95), box(2, 2, 3, 3, 0.6)], "dog": [box(0, 0, 1, 1, 0.5)]}
    assert {k: len(v) for k, v in keep_all(found, "counting", Thresholds()).items()} == {"cat": 1}
    assert {k: len(v) for k, v in keep_all(found, "two_object", Thresholds()).items()} == {"cat": 2, "dog": 1}


def test_nms_only_below_one() -> None:
    a, b = box(0, 0, 10, 10, 0.9), box(1, 0, 11, 10, 0.8)  # pixel-inclusive: 11 x 11 each, overlap 10 x 11
    assert iou(a.box, b.box) == 110 / 132
    assert len(keep([a, b], confidence=0.3, limits=Thresholds())) == 2
    assert keep([a, b], confidence=0.3, limits=Thresholds(nms_threshold=0.5)) == [a]


# -- position ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (box(0, 0, 10, 10), box(50, 0, 60, 10), {"left of"}),  # offset (-50, 0) shrunk to -48: dx = -0.96
        (box(50, 0, 60, 10), box(0, 0, 10, 10), {"right of"}),
        (box(0, 0, 10, 10), box(0, 50, 10, 60), {"above"}),
        (box(0, 50, 10, 60), box(0, 0, 10, 10), {"below"}),
        (at(10, 10), at(0, 0), {"right of", "below"}),  # (10 - 0.8) / sqrt(200) = 0.65 on both axes
        (at(-10, -10), at(0, 0), {"left of", "above"}),
        (at(0, 0, 10), at(0.5, 0.5, 10), set()),  # shrunk offset clamps to 0 on both axes: no relation
        (at(3, 0, 10), at(0, 0, 10), set()),  # 3 - 0.1 * 20 = 1: dx = 1 / 3, under 0.5 on every axis
        (at(10, 6, 2), at(0, 0, 2), {"right of"}),  # dx = 9.6/11.66 = 0.82, dy = 5.6/11.66 = 0.48
    ],
)
def test_relations(a: Detection, b: Detection, expected: set[str]) -> None:
    assert relation(a, b) == expected


def test_the_margin_is_an_option() -> None:
    assert relation(at(3, 0, 10), at(0, 0, 10), margin=0.0) == {"right of"}
    assert relation(at(3, 0, 10), at(0, 0, 10), margin=0.1) == set()


# -- include / exclude -------------------------------------------------------------------------------------

SINGLE = {"tag": "single_object", "include": [{"class": "cat", "count": 1}]}
TWO = {"tag": "two_object", "include": [{"class": "cat", "count": 1}, {"class": "dog", "count": 1}]}
COUNT_2 = {"tag": "counting", "include": [{"class": "clock", "count": 2}], "exclude": [{"class": "clock", "count": 3}]}
POSITION = {
    "tag": "position",
    "include": [{"class": "dog", "count": 1}, {"class": "cat", "count": 1, "position": ["left of", 0]}],
}


def test_single_object() -> None:
    yes = evaluate(SINGLE, {"cat": [box(0, 0, 5, 5)]}, no_colors)
    assert (yes.correct, yes.partial, yes.reason) == (True, 1.0, "")
    no = evaluate(SINGLE, {"dog": [box(0, 0, 5, 5)]}, no_colors)
    assert (no.correct, no.partial, no.reason) == (False, 0.0, "expected cat>=1, found 0")


def test_two_object_is_an_and() -> None:
    both = evaluate(TWO, {"cat": [box(0, 0, 5, 5)], "dog": [box(9, 9, 12, 12)]}, no_colors)
    assert both.correct and both.partial == 1.0
    one = evaluate(TWO, {"cat": [box(0, 0, 5, 5)]}, no_colors)
    assert not one.correct and one.partial == 0.5 and one.reasons == ("expected dog>=1, found 0",)


@pytest.mark.parametrize(
    ("clocks", "correct", "partial"), [(2, True, 1.0), (3, False, 0.5), (1, False, 0.5), (0, False, 0.5)]
)
def test_counting_with_exclude(clocks: int, correct: bool, partial: float) -> None:
    verdict = evaluate(COUNT_2, {"clock": [at(10 * i, 0) for i in range(clocks)]} if clocks else {}, no_colors)
    assert (verdict.correct, verdict.partial) == (correct, partial)
    if clocks == 3:
        assert verdict.reasons == ("expected clock<3, found 3",)


def test_exclude_clauses_are_an_or() -> None:
    metadata = {
        "tag": "counting",
        "include": [{"class": "cat", "count": 1}],
        "exclude": [{"class": "dog", "count": 1}, {"class": "cow", "count": 2}],
    }
    assert evaluate(metadata, {"cat": [at(0, 0)], "cow": [at(9, 9)]}, no_colors).correct
    only_dog = evaluate(metadata, {"cat": [at(0, 0)], "dog": [at(9, 9)]}, no_colors)
    assert not only_dog.correct and only_dog.met == 2 and only_dog.total == 3


def test_colors_classify_the_top_count_detections() -> None:
    metadata = {"tag": "colors", "include": [{"class": "car", "count": 1, "color": "red"}]}
    strong, weak = at(0, 0, score=0.9), at(20, 0, score=0.5)
    asked: list[int] = []

    def colors(name: str, detections: Sequence[Detection]) -> list[str]:
        asked.append(len(detections))
        return given_colors({id(strong): "blue", id(weak): "red"})(name, detections)

    verdict = evaluate(metadata, {"car": [strong, weak]}, colors)
    assert asked == [1]  # only the top `count` detection is classified
    assert not verdict.correct and verdict.partial == 0.5
    assert verdict.reason == "expected red car>=1, found 0 red; and 1 blue"
    assert evaluate(metadata, {"car": [weak]}, colors).correct


def test_color_counting_needs_count_of_that_color() -> None:
    metadata = {"tag": "counting", "include": [{"class": "cup", "count": 2, "color": "green"}]}
    a, b, c = at(0, 0), at(20, 0), at(40, 0)
    table = {id(a): "green", id(b): "white", id(c): "green"}
    assert not evaluate(metadata, {"cup": [a, b, c]}, given_colors(table)).correct  # top 2: green, white
    assert evaluate(metadata, {"cup": [a, c, b]}, given_colors(table)).correct


def test_color_attr() -> None:
    metadata = {
        "tag": "color_attr",
        "include": [{"class": "bus", "count": 1, "color": "green"}, {"class": "cake", "count": 1, "color": "purple"}],
    }
    bus, cake = at(0, 0), at(20, 20)
    right = evaluate(metadata, {"bus": [bus], "cake": [cake]}, given_colors({id(bus): "green", id(cake): "purple"}))
    assert right.correct and right.partial == 1.0
    swapped = evaluate(metadata, {"bus": [bus], "cake": [cake]}, given_colors({id(bus): "purple", id(cake): "green"}))
    assert not swapped.correct and swapped.met == 2 and swapped.total == 4


def test_position_correct_wrong_and_no_relation() -> None:
    dog, cat_left, cat_right, cat_on = at(50, 50), at(10, 50), at(90, 50), at(50.5, 50)
    assert evaluate(POSITION, {"dog": [dog], "cat": [cat_left]}, no_colors).correct
    wrong = evaluate(POSITION, {"dog": [dog], "cat": [cat_right]}, no_colors)
    assert not wrong.correct and wrong.partial == 2 / 3
    assert wrong.reason == "expected cat left of target, found right of target"  # GenEval's text
    overlapping = evaluate(POSITION, {"dog": [dog], "cat": [cat_on]}, no_colors)
    assert not overlapping.correct and overlapping.reason == "expected cat left of target, found  target"


def test_position_without_target_and_against_every_target_object() -> None:
    missing = evaluate(POSITION, {"cat": [at(10, 50)]}, no_colors)
    assert missing.reasons == ("expected dog>=1, found 0", "no target for cat to be left of")
    assert missing.met == 1 and missing.total == 3
    two_dogs = {
        "tag": "position",
        "include": [{"class": "dog", "count": 2}, {"class": "cat", "count": 1, "position": ["left of", 0]}],
    }
    between = {"dog": [at(0, 50), at(90, 50)], "cat": [at(50, 50)]}  # left of one dog, right of the other
    assert not evaluate(two_dogs, between, no_colors).correct
    assert evaluate(two_dogs, {"dog": [at(60, 50), at(90, 50)], "cat": [at(10, 50)]}, no_colors).correct


def test_masks_do_not_change_the_rules() -> None:
    mask = np.zeros((8, 8), dtype=bool)
    assert evaluate(SINGLE, {"cat": [Detection(box=(0, 0, 4, 4), score=0.9, mask=mask)]}, no_colors).correct
