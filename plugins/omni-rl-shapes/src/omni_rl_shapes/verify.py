"""The rule-based verifier: does an image show what its prompt asks for? (docs/math.md#shapes-verifier)

Pipeline: parse the prompt (:mod:`scenes`), segment colors and find connected components (:mod:`segment`),
classify each component's shape (:mod:`classify`), then check four things, each a sub-score in [0, 1]:

* ``color``:    Jaccard overlap of the colors the prompt names and the colors present
                (|expected ∩ found| / |expected ∪ found|), so a missing *or* an extra color costs.
* ``count``:    per named color, 1 when exactly the asked number of components of that color is present;
                averaged over the named colors.
* ``shape``:    per named color, the number of its components with the asked shape (capped at the asked
                count) divided by the asked count; averaged over the named colors. A component's shape is
                the best-fitting template (:mod:`classify`), or none when even that fits poorly.
* ``position``: position prompts: the largest component of the color is in the named half, at least
                ``position_margin`` past the middle; relation prompts: the offset between the two largest
                components' box centres points along the relation's direction (at least ``position_margin``
                along it, and within 60 degrees of it, as GenEval's lenient rule). Prompts without a position
                have nothing to violate and score 1.

``strict`` is GenEval's per-prompt correctness: every sub-score is 1. The total ``score`` is the product of the
sub-scores with partial credit (1 exactly when strict, 0 when anything is entirely wrong, graded in between,
e.g. one of two objects' shape right) and ``float(strict)`` without. The product rather than the mean keeps an
image of the wrong object from scoring 2/3 for getting the color and count right.
"""

from __future__ import annotations

import math

import attrs
import numpy as np

from omni_rl_shapes.classify import shape_scores
from omni_rl_shapes.config import ShapesRewardConfig
from omni_rl_shapes.scenes import SHAPES, Scene, parse_prompt
from omni_rl_shapes.segment import Component, components

#: the verifier's tolerances are the reward's options
_DEFAULTS = ShapesRewardConfig()


@attrs.frozen
class Verdict:
    """Sub-scores and total of one image against one prompt."""

    color: float
    count: float
    shape: float
    position: float
    strict: bool
    score: float


def shape_of(component: Component, min_iou: float) -> str | None:
    """The component's shape, or None when no shape explains it well enough."""
    scores = shape_scores(component.coverage)
    best = int(np.argmax(scores))
    return SHAPES[best] if scores[best] >= min_iou else None


def _largest(found: list[Component]) -> Component | None:
    return max(found, key=lambda c: c.area, default=None)


def _unit_centre(c: Component, height: int, width: int) -> tuple[float, float]:
    x, y = c.centre()
    return x / width, y / height


def _position_score(
    scene: Scene, by_color: dict[str, list[Component]], height: int, width: int, margin: float
) -> float:
    if scene.position is not None:
        subject = _largest(by_color.get(scene.subject.color, []))
        if subject is None:
            return 0.0
        x, y = _unit_centre(subject, height, width)
        ok = {
            "left": x <= 0.5 - margin,
            "right": x >= 0.5 + margin,
            "top": y <= 0.5 - margin,
            "bottom": y >= 0.5 + margin,
        }[scene.position]
        return float(ok)
    if scene.relation is not None and scene.reference is not None:
        subject = _largest(by_color.get(scene.subject.color, []))
        reference = _largest(by_color.get(scene.reference.color, []))
        if subject is None or reference is None:
            return 0.0
        sx, sy = _unit_centre(subject, height, width)
        rx, ry = _unit_centre(reference, height, width)
        dx, dy = sx - rx, sy - ry  # from the reference to the subject
        along = {"left of": -dx, "right of": dx, "above": -dy, "below": dy}[scene.relation]
        return float(along >= margin and along >= 0.5 * math.hypot(dx, dy))
    return 1.0


def verify_components(
    found: list[Component], scene: Scene, height: int, width: int, thresholds: ShapesRewardConfig
) -> Verdict:
    """Score already-extracted components against a scene (split out so tests can feed components)."""
    by_color: dict[str, list[Component]] = {}
    for c in found:
        by_color.setdefault(c.color, []).append(c)
    wanted: dict[str, tuple[str, int]] = {}
    for obj in scene.objects:
        shape, n = wanted.get(obj.color, (obj.shape, 0))
        wanted[obj.color] = (shape, n + 1)

    expected, present = set(wanted), set(by_color)
    color = len(expected & present) / len(expected | present)
    count = float(np.mean([len(by_color.get(c, [])) == n for c, (_, n) in wanted.items()]))
    shape_hits = []
    for c, (shape, n) in wanted.items():
        hits = sum(shape_of(comp, thresholds.min_shape_iou) == shape for comp in by_color.get(c, []))
        shape_hits.append(min(hits, n) / n)
    shape = float(np.mean(shape_hits))
    position = _position_score(scene, by_color, height, width, thresholds.position_margin)

    strict = color == 1.0 and count == 1.0 and shape == 1.0 and position == 1.0
    score = color * count * shape * position if thresholds.partial_credit else float(strict)
    return Verdict(color, count, shape, position, strict, float(score))


def verify(image: np.ndarray, prompt: str | Scene, thresholds: ShapesRewardConfig = _DEFAULTS) -> Verdict:
    """Verify one uint8 (H, W, 3) image against a prompt (or parsed scene)."""
    scene = parse_prompt(prompt) if isinstance(prompt, str) else prompt
    height, width = image.shape[:2]
    min_pixels = max(2, round(thresholds.min_area * height * width))
    found = components(image, threshold=thresholds.color_threshold, min_area=min_pixels)
    return verify_components(found, scene, height, width, thresholds)
