"""GenEval's verdict rules on detections, with no model: which detections are kept, the position relation, and
the include / exclude logic, as GenEval's ``evaluation/evaluate_images.py`` (commit af4902f) decides them
(docs/math.md#geneval).

Separated from the models so every rule is tested on hand-built boxes, masks, scores and colours, and so the
same code serves the reward (partial credit) and the benchmark (GenEval's strict correct / incorrect).

GenEval's detector hands it float32 arrays and its environment pins numpy 1.23, so its comparisons are float32
ones in places a reading of the formulas would not suggest. Each rule here reads a box and a score as float32
and does the arithmetic in the precision numpy 1.23 uses, so the verdicts are GenEval's up to the last bit:

- a confidence is kept when float32(score) > float32(threshold): a score equal to the threshold's float32 value
  is dropped (so is NaN);
- NMS (``nms_threshold``, GenEval's ``max_overlap``) uses pixel-inclusive areas, (x1 - x0 + 1) * (y1 - y0 + 1),
  each difference taken in float32, the rest in float64; a box is dropped when its IoU with a kept one is >=
  the threshold;
- the position relation is computed in float32 throughout (the margin cast to float32).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from omni_rl_geneval.metadata import COLORS
from omni_rl_geneval.ordering import descending

#: ``colors(classname, detections) -> one colour name per detection`` (CLIP in the scorer, given in tests)
ColorFn = Callable[[str, Sequence["Detection"]], list[str]]

#: the shrunk centre offset below which (on both axes) two objects stand in no relation (GenEval's 1e-3)
_NO_OFFSET = np.float32(1e-3)


@attrs.frozen(kw_only=True, eq=False)
class Detection:
    """One detected instance: box (x0, y0, x1, y1) in pixels, confidence, and its mask (bool H x W) if any.
    The rules read ``box`` and ``score`` as float32, the dtype of GenEval's detector output."""

    box: tuple[float, float, float, float]
    score: float
    mask: np.ndarray | None = None


@attrs.frozen(kw_only=True)
class Thresholds:
    """The keep rules' numbers (GenEval's defaults and its ``--options`` names in comments)."""

    #: GenEval's ``threshold``
    threshold: float = 0.3
    #: GenEval's ``counting_threshold``
    counting_threshold: float = 0.9
    #: GenEval's ``max_objects``
    max_objects: int = 16
    #: GenEval's ``max_overlap``: exactly 1.0 turns NMS off
    nms_threshold: float = 1.0
    #: GenEval's ``position_threshold``
    position_threshold: float = 0.1


@attrs.frozen(kw_only=True)
class Verdict:
    """An image's result: GenEval's ``correct``, the fraction of requirements met, and the reasons it failed."""

    correct: bool
    met: int
    total: int
    reasons: tuple[str, ...] = ()

    @property
    def partial(self) -> float:
        """Requirements met over requirements: each include clause's count, its colour and its position, and
        each exclude clause, count one each (a colour or position not checked because the count failed is unmet)."""
        return self.met / self.total if self.total else 1.0

    @property
    def reason(self) -> str:
        """GenEval's ``reason`` field: the failures, one a line."""
        return "\n".join(self.reasons)


def iou(a: Sequence[float], b: Sequence[float]) -> float:
    """GenEval's box IoU: pixel-inclusive areas (x1 - x0 + 1) * (y1 - y0 + 1), each side clamped at 0, of the two
    (x0, y0, x1, y1) boxes and of their intersection (max of the x0s and y0s, min of the x1s and y1s); 0 when the
    union is 0. The differences are float32 (the boxes' dtype), the + 1 and everything after float64."""
    first, second = [np.float32(v) for v in a[:4]], [np.float32(v) for v in b[:4]]
    overlap = [max(first[0], second[0]), max(first[1], second[1]), min(first[2], second[2]), min(first[3], second[3])]
    inter = _area(overlap)
    union = _area(first) + _area(second) - inter
    return inter / union if union else 0.0


def _area(box: Sequence[np.float32]) -> float:
    return max(float(box[2] - box[0]) + 1.0, 0.0) * max(float(box[3] - box[1]) + 1.0, 0.0)


def keep(detections: Sequence[Detection], *, confidence: float, limits: Thresholds) -> list[Detection]:
    """One class's kept detections, in GenEval's steps: ordered by confidence (highest first, ties in the order
    of :func:`omni_rl_geneval.ordering.descending`), those with float32 score > float32(``confidence``), the first
    ``max_objects`` of them, then greedy NMS unless ``nms_threshold`` is exactly 1: the best remaining is kept and
    every other whose :func:`iou` with it is not below ``nms_threshold`` is dropped."""
    scores = np.array([d.score for d in detections], dtype=np.float32)
    above = np.float32(confidence)
    ordered = [i for i in descending(scores.tolist()) if scores[i] > above][: limits.max_objects]
    kept: list[Detection] = []
    while ordered:
        best = detections[ordered.pop(0)]
        kept.append(best)
        if limits.nms_threshold != 1.0:
            ordered = [i for i in ordered if iou(best.box, detections[i].box) < limits.nms_threshold]
    return kept


def keep_all(detections: Mapping[str, Sequence[Detection]], tag: str, limits: Thresholds) -> dict[str, list[Detection]]:
    """Every class's kept detections for a prompt of ``tag`` (``counting_threshold`` for counting, else
    ``threshold``); a class with none kept is left out, as GenEval deletes it."""
    confidence = limits.counting_threshold if tag == "counting" else limits.threshold
    kept = {name: keep(found, confidence=confidence, limits=limits) for name, found in detections.items()}
    return {name: found for name, found in kept.items() if found}


def relation(a: Detection, b: Detection, margin: float = 0.1) -> set[str]:
    """GenEval's relations of A to B, in float32: the offset of the box centres ((x0 + x1) / 2, (y0 + y1) / 2),
    each axis's magnitude shrunk by ``margin`` x (A's + B's size on that axis, sizes |x1 - x0| and |y1 - y0|) and
    clamped at 0, the sign kept; none when both shrunk values are under 1e-3; else, divided by the unshrunk
    offset's length, dx < -0.5 "left of", dx > 0.5 "right of", dy < -0.5 "above", dy > 0.5 "below" (image y grows
    downward; two relations can hold at once)."""
    box_a, box_b = np.asarray(a.box[:4], dtype=np.float32), np.asarray(b.box[:4], dtype=np.float32)
    offset = (box_a[:2] + box_a[2:]) / np.float32(2) - (box_b[:2] + box_b[2:]) / np.float32(2)
    sizes = np.abs(box_a[2:] - box_a[:2]) + np.abs(box_b[2:] - box_b[:2])
    shrunk = np.maximum(np.abs(offset) - np.float32(margin) * sizes, np.float32(0)) * np.sign(offset)
    if np.all(np.abs(shrunk) < _NO_OFFSET):
        return set()
    length = np.sqrt(offset[0] * offset[0] + offset[1] * offset[1])  # numpy 1.23's float32 norm, bit for bit
    dx, dy = shrunk / length
    found = set()
    if dx < -0.5:
        found.add("left of")
    if dx > 0.5:
        found.add("right of")
    if dy < -0.5:
        found.add("above")
    if dy > 0.5:
        found.add("below")
    return found


def evaluate(
    metadata: Mapping[str, Any], kept: Mapping[str, Sequence[Detection]], colors: ColorFn, margin: float = 0.1
) -> Verdict:
    """GenEval's verdict on an image whose kept detections (:func:`keep_all`) are ``kept``.

    Include clauses are ANDed, in order: the class's first ``count`` kept detections must be ``count`` many;
    with ``color`` those are classified and at least ``count`` of them must be that colour; with ``position``
    (checked only when count and colour passed) each of them must stand in the relation to each of the first
    ``count`` detections of the clause it refers to, which must itself have matched. Exclude clauses are ORed: a
    class with at least ``count`` kept detections fails the image. The reasons are GenEval's texts.
    """
    reasons: list[str] = []
    met = total = 0
    matched_groups: list[list[Detection] | None] = []
    for clause in metadata.get("include", []):
        name, count = clause["class"], int(clause["count"])
        found = list(kept.get(name, []))[:count]
        total += 1 + ("color" in clause) + ("position" in clause)
        matched = len(found) >= count
        if not matched:
            reasons.append(f"expected {name}>={count}, found {len(found)}")
        else:
            met += 1
            if "color" in clause:
                matched = _color_ok(clause, found, colors, reasons)
                met += matched
            if "position" in clause and matched:
                matched = _position_ok(clause, found, matched_groups, reasons, margin)
                met += matched
        matched_groups.append(found if matched else None)
    for clause in metadata.get("exclude", []):
        name, count = clause["class"], int(clause["count"])
        total += 1
        if len(kept.get(name, [])) >= count:
            reasons.append(f"expected {name}<{count}, found {len(kept[name])}")
        else:
            met += 1
    return Verdict(correct=not reasons, met=met, total=total, reasons=tuple(reasons))


def _color_ok(clause: Mapping[str, Any], found: list[Detection], colors: ColorFn, reasons: list[str]) -> bool:
    name, count, wanted = clause["class"], int(clause["count"]), clause["color"]
    predicted = colors(name, found)
    if predicted.count(wanted) >= count:
        return True
    seen = ", ".join(f"{predicted.count(c)} {c}" for c in COLORS if c in predicted)
    reasons.append(f"expected {wanted} {name}>={count}, found {predicted.count(wanted)} {wanted}; and {seen}")
    return False


def _position_ok(
    clause: Mapping[str, Any],
    found: list[Detection],
    matched_groups: list[list[Detection] | None],
    reasons: list[str],
    margin: float,
) -> bool:
    name = clause["class"]
    expected, target = clause["position"][0], int(clause["position"][1])
    targets = matched_groups[target]
    if targets is None:
        reasons.append(f"no target for {name} to be {expected}")
        return False
    for obj in found:
        for other in targets:
            actual = relation(obj, other, margin)
            if expected not in actual:
                # GenEval joins a set (its order varies with Python's string hashing); sorted here
                reasons.append(f"expected {name} {expected} target, found {' and '.join(sorted(actual))} target")
                return False
    return True
