"""The clip verifier: does a clip show what its motion prompt asks for, in every frame and over time?

Three sub-scores in [0, 1], each on every frame's color components (:mod:`segment`), an object being the largest
component of its color (the grammar's objects have distinct colors):

* ``frame``:       the still verifier (:mod:`verify`: color, count, shape, position) on each frame, averaged:
                   the scene is right all along.
* ``motion``:      per named object, its centre's travel from the first frame to the last: full credit when it
                   goes at least ``min_distance`` in the asked direction, within ``max_angle`` of it;
                   proportional credit for less; 0 for the wrong direction or a missing object. Averaged over
                   the objects.
* ``consistency``: the share of consecutive frame pairs in which nothing changes identity: the same colors with
                   the same component counts, each named object keeping its shape, and no centre jumping more than
                   ``max_jump`` (a flicker, a colour change or a teleport breaks a pair).

``strict`` is all three 1; ``score`` is their product with ``partial_credit`` (else ``float(strict)``), so a
clip that is right in every frame but does not move scores 0, as a still image of the right scene does.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import attrs
import numpy as np

from omni_rl_shapes.motion.config import ShapesMotionRewardConfig
from omni_rl_shapes.motion.scenes import VECTORS, MotionScene, parse_motion_prompt
from omni_rl_shapes.segment import Component, components
from omni_rl_shapes.verify import shape_of, verify_components

_DEFAULTS = ShapesMotionRewardConfig()


@attrs.frozen
class MotionVerdict:
    """Sub-scores and total of one clip against one motion prompt."""

    frame: float
    motion: float
    consistency: float
    strict: bool
    score: float


def _objects(found: list[Component]) -> dict[str, Component]:
    """The largest component of each color in a frame."""
    largest: dict[str, Component] = {}
    for c in found:
        if c.color not in largest or c.area > largest[c.color].area:
            largest[c.color] = c
    return largest


def _centre(c: Component, height: int, width: int) -> tuple[float, float]:
    x, y = c.centre()
    return x / width, y / height


def _travel_score(
    first: Component | None, last: Component | None, direction: str, size: tuple[int, int], config: Any
) -> float:
    if first is None or last is None:
        return 0.0
    (x0, y0), (x1, y1) = _centre(first, *size), _centre(last, *size)
    ux, uy = VECTORS[direction]
    dx, dy = x1 - x0, y1 - y0
    along = dx * ux + dy * uy
    if along <= 0 or abs(dx * uy - dy * ux) > along * math.tan(math.radians(config.max_angle)):
        return 0.0
    return min(1.0, along / config.min_distance)


def _pair_consistent(
    a: list[Component], b: list[Component], named: list[str], size: tuple[int, int], config: Any
) -> bool:
    counts_a = sorted(c.color for c in a)
    if counts_a != sorted(c.color for c in b):
        return False
    objects_a, objects_b = _objects(a), _objects(b)
    for color in named:
        if color not in objects_a or color not in objects_b:
            return False
        ca, cb = objects_a[color], objects_b[color]
        if shape_of(ca, config.min_shape_iou) != shape_of(cb, config.min_shape_iou):
            return False
        (xa, ya), (xb, yb) = _centre(ca, *size), _centre(cb, *size)
        if math.hypot(xb - xa, yb - ya) > config.max_jump:
            return False
    return True


def verify_clip(
    frames: np.ndarray, prompt: str | MotionScene, config: ShapesMotionRewardConfig = _DEFAULTS
) -> MotionVerdict:
    """Verify one uint8 clip (F, H, W, 3) against a motion prompt (or parsed motion scene)."""
    scene = parse_motion_prompt(prompt) if isinstance(prompt, str) else prompt
    if frames.ndim != 4 or len(frames) < 2:
        raise ValueError(f"a clip is uint8 (F, H, W, 3) with F >= 2, got shape {frames.shape}")
    height, width = frames.shape[1:3]
    min_pixels = max(2, round(config.min_area * height * width))
    found = [components(f, threshold=config.color_threshold, min_area=min_pixels) for f in frames]
    frame = float(np.mean([verify_components(f, scene.still, height, width, config).score for f in found]))
    named = list(dict.fromkeys(o.color for o in scene.objects))
    first, last = _objects(found[0]), _objects(found[-1])
    size = (height, width)
    motion = float(np.mean([_travel_score(first.get(c), last.get(c), scene.direction, size, config) for c in named]))
    pairs = [_pair_consistent(a, b, named, size, config) for a, b in itertools.pairwise(found)]
    consistency = float(np.mean(pairs))
    strict = frame == 1.0 and motion == 1.0 and consistency == 1.0
    score = frame * motion * consistency if config.partial_credit else float(strict)
    return MotionVerdict(frame, motion, consistency, strict, float(score))
