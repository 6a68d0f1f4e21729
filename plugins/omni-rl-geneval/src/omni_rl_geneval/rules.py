"""GenEval's verdict rules on detections, with no model: which detections are kept, the position relation, and
the include / exclude logic (``evaluation/evaluate_images.py`` of GenEval, re-implemented from its rules).

Separated from the models so every rule is tested on hand-built boxes, masks, scores and colours, and so the
same code serves the reward (partial credit) and the benchmark (GenEval's strict correct / incorrect).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np

#: ``colors(classname, detections) -> one colour name per detection`` (CLIP in the scorer, given in tests)
ColorFn = Callable[[str, Sequence["Detection"]], list[str]]


@attrs.frozen(kw_only=True, eq=False)
class Detection:
    """One detected instance: box (x0, y0, x1, y1) in pixels, confidence, and its mask (bool H x W) if any."""

    box: tuple[float, float, float, float]
    score: float
    mask: np.ndarray | None = None


@attrs.frozen(kw_only=True)
class Thresholds:
    """The keep rules' numbers (GenEval's defaults; options of the reward and benchmark)."""

    threshold: float = 0.3
    counting_threshold: float = 0.9
    max_objects: int = 16
    nms_threshold: float = 1.0
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
        return "; ".join(self.reasons)


def iou(a: Sequence[float], b: Sequence[float]) -> float:
    """Intersection over union of two (x0, y0, x1, y1) boxes."""
    width = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    height = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = width * height
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def keep(detections: Sequence[Detection], *, confidence: float, limits: Thresholds) -> list[Detection]:
    """One class's kept detections: sorted by confidence, above ``confidence``, the first ``max_objects``, then
    (only when ``nms_threshold < 1``) greedy NMS by box IoU, as GenEval orders these steps."""
    ordered = sorted((d for d in detections if d.score > confidence), key=lambda d: -d.score)[: limits.max_objects]
    kept: list[Detection] = []
    while ordered:
        best = ordered.pop(0)
        kept.append(best)
        if limits.nms_threshold < 1.0:
            ordered = [d for d in ordered if iou(best.box, d.box) < limits.nms_threshold]
    return kept


def keep_all(detections: Mapping[str, Sequence[Detection]], tag: str, limits: Thresholds) -> dict[str, list[Detection]]:
    """Every class's kept detections for a prompt of ``tag`` (0.9 confidence for counting, else 0.3)."""
    confidence = limits.counting_threshold if tag == "counting" else limits.threshold
    kept = {name: keep(found, confidence=confidence, limits=limits) for name, found in detections.items()}
    return {name: found for name, found in kept.items() if found}


def relation(a: Detection, b: Detection, margin: float = 0.1) -> set[str]:
    """The relations of A to B: the centre offset, each axis shrunk toward 0 by ``margin`` x (A's + B's size
    on that axis) and clamped at 0; none when both are ~0; else, over the unshrunk offset's norm, dx < -0.5
    "left of", dx > 0.5 "right of", dy < -0.5 "above", dy > 0.5 "below" (image y grows downward)."""
    box_a, box_b = np.asarray(a.box, dtype=np.float64), np.asarray(b.box, dtype=np.float64)
    offset = (box_a[:2] + box_a[2:]) / 2 - (box_b[:2] + box_b[2:]) / 2
    sizes = (box_a[2:] - box_a[:2]) + (box_b[2:] - box_b[:2])
    shrunk = np.maximum(np.abs(offset) - margin * sizes, 0.0) * np.sign(offset)
    if np.all(np.abs(shrunk) < 1e-3):
        return set()
    dx, dy = shrunk / np.linalg.norm(offset)
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

    Include clauses are ANDed: the class needs ``count`` detections; with ``color`` the top ``count`` are
    classified and at least ``count`` must be that colour; with ``position`` (checked only when count and colour
    passed, as GenEval does) each of them must stand in the relation to every object of the target clause, which
    must itself have matched. Exclude clauses are ORed: a class with at least ``count`` detections fails the image.
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
    seen = ", ".join(f"{predicted.count(c)} {c}" for c in dict.fromkeys(predicted))
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
                reasons.append(
                    f"expected {name} {expected} target, found {' and '.join(sorted(actual)) or 'no'} relation"
                )
                return False
    return True
