"""The ``shapes_edit`` reward: did the edit happen (``edit``), was everything else kept (``preserve``), and is the
output the target scene (``strict``). ``score = edit x preserve`` (``float(strict)`` without partial credit).

``edit`` is the shapes verifier on the target description of what the instruction changes, run on the output's
components of the colors the edit is about (so the untouched objects do not count against it):

* recolor: the verifier's score of "a <new color> <shape>", times 0 when the old color is still there
* move:    the verifier's relation score of "<subject> <relation> <reference>" (the source fails it by construction)
* add:     the verifier's score of "a <color> <shape>" for the added object
* remove:  1 when no object of the removed color is left, else 0
* count:   the verifier's score of "<n> <color> <shape>s"
* noop:    1 (the control: preservation decides)

``preserve`` is the fraction of untouched objects found in the output where they were, over the untouched objects
plus every object more than the target has (a "nothing else added" penalty): an untouched object is found when a
component of its color has its shape, its box centre within ``position_tolerance`` of the source's and its box side
within ``size_tolerance`` of the source's. Where they were is measured on the source image the model was given
(the sample's condition, segmented by the same segmenter, so the segmenter's own bias cancels) and read from the
task's metadata when no condition came with the sample.

``strict`` = edit 1, preserve 1, exactly the target's number of objects, and every ``fixed`` object (the untouched
ones and a recoloured one) in its place within the tolerances.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from omni_rl.batch import RewardResult
from omni_rl.errors import RuntimeFailure
from omni_rl_shapes.config import ShapesRewardConfig
from omni_rl_shapes.edit.config import ShapesEditRewardConfig
from omni_rl_shapes.scenes import Obj, counting, related, single
from omni_rl_shapes.segment import Component, components
from omni_rl_shapes.verify import shape_of, verify_components

SUB_SCORES: tuple[str, ...] = ("edit", "preserve")
#: the metadata fields every task row carries (written by ``make_tasks``)
REQUIRED_FIELDS: tuple[str, ...] = ("kind", "edit", "target_objects", "untouched", "fixed")


@attrs.frozen
class EditVerdict:
    edit: float
    preserve: float
    strict: bool
    score: float


@attrs.frozen
class _Box:
    """An object's box in unit coordinates: centre and side (the larger of width and height)."""

    cx: float
    cy: float
    side: float


def _box(c: Component, height: int, width: int) -> _Box:
    x, y = c.centre()
    return _Box(x / width, y / height, max(c.height / height, c.width / width))


def _detect(image: np.ndarray, config: ShapesEditRewardConfig) -> list[Component]:
    height, width = image.shape[:2]
    return components(image, threshold=config.color_threshold, min_area=max(2, round(config.min_area * height * width)))


def _verifier(config: ShapesEditRewardConfig) -> ShapesRewardConfig:
    return ShapesRewardConfig(
        partial_credit=True,
        color_threshold=config.color_threshold,
        min_area=config.min_area,
        position_margin=config.position_margin,
        min_shape_iou=config.min_shape_iou,
    )


def _obj(o: Mapping[str, Any]) -> Obj:
    return Obj(str(o["color"]), str(o["shape"]))


def edit_score(kind: str, edit: Mapping[str, Any], found: list[Component], h: int, w: int, config: Any) -> float:
    """The ``edit`` sub-score of one output (see the module docstring)."""
    if kind == "noop":
        return 1.0
    thresholds = _verifier(config)
    subject = _obj(edit["object"])
    if kind == "remove":
        return float(not any(c.color == subject.color for c in found))
    if kind == "recolor":
        new = Obj(str(edit["to"]), subject.shape)
        mine = [c for c in found if c.color == new.color]
        gone = not any(c.color == subject.color for c in found)
        return verify_components(mine, single(new.color, new.shape), h, w, thresholds).score * float(gone)
    if kind == "add":
        mine = [c for c in found if c.color == subject.color]
        return verify_components(mine, single(subject.color, subject.shape), h, w, thresholds).score
    if kind == "count":
        mine = [c for c in found if c.color == subject.color]
        scene = counting(subject.color, subject.shape, int(edit["count"]))
        return verify_components(mine, scene, h, w, thresholds).score
    if kind == "move":
        reference = _obj(edit["reference"])
        mine = [c for c in found if c.color in (subject.color, reference.color)]
        scene = related(subject, str(edit["relation"]), reference)
        return verify_components(mine, scene, h, w, thresholds).score
    raise RuntimeFailure(f"the shapes_edit reward does not know edit kind {kind!r}", hint=_HINT)


def _matches(c: Component, want: Obj, at: _Box, h: int, w: int, config: ShapesEditRewardConfig) -> bool:
    box = _box(c, h, w)
    return (
        shape_of(c, config.min_shape_iou) == want.shape
        and math.hypot(box.cx - at.cx, box.cy - at.cy) <= config.position_tolerance
        and abs(box.side / at.side - 1.0) <= config.size_tolerance
    )


def _found_at(found: list[Component], want: Obj, at: _Box, h: int, w: int, config: ShapesEditRewardConfig) -> bool:
    """Whether a component of ``want``'s color, nearest to ``at``, is ``want`` in its place."""
    mine = [c for c in found if c.color == want.color]
    if not mine:
        return False
    nearest = min(mine, key=lambda c: math.hypot(_box(c, h, w).cx - at.cx, _box(c, h, w).cy - at.cy))
    return _matches(nearest, want, at, h, w, config)


def _reference_boxes(
    target: Sequence[Mapping[str, Any]], source: np.ndarray | None, config: ShapesEditRewardConfig
) -> list[_Box]:
    """Where each target object is expected: the metadata's placement, replaced for an object whose color and
    shape the source image shows (one component of that color) by what the segmenter measures there."""
    boxes = [_Box(float(o["cx"]), float(o["cy"]), float(o["size"])) for o in target]
    if source is None:
        return boxes
    sh, sw = source.shape[:2]
    seen = _detect(source, config)
    for k, o in enumerate(target):
        mine = [c for c in seen if c.color == o["color"]]
        if len(mine) == 1 and shape_of(mine[0], config.min_shape_iou) == o["shape"]:
            measured = _box(mine[0], sh, sw)
            if math.hypot(measured.cx - boxes[k].cx, measured.cy - boxes[k].cy) <= config.position_tolerance:
                boxes[k] = measured
    return boxes


def score_edit(
    image: np.ndarray,
    metadata: Mapping[str, Any],
    config: ShapesEditRewardConfig,
    source: np.ndarray | None = None,
) -> EditVerdict:
    """Score one uint8 (H, W, 3) output against its task's metadata (and the source image, when given)."""
    h, w = image.shape[:2]
    found = _detect(image, config)
    target = list(metadata["target_objects"])
    untouched = [int(k) for k in metadata["untouched"]]
    fixed = [int(k) for k in metadata["fixed"]]
    boxes = _reference_boxes(target, source, config)
    edit = edit_score(str(metadata["kind"]), metadata["edit"], found, h, w, config)
    kept = sum(_found_at(found, _obj(target[k]), boxes[k], h, w, config) for k in untouched)
    extras = max(0, len(found) - len(target))
    preserve = kept / (len(untouched) + extras) if untouched or extras else 1.0
    strict = (
        edit == 1.0
        and preserve == 1.0
        and len(found) == len(target)
        and all(_found_at(found, _obj(target[k]), boxes[k], h, w, config) for k in fixed)
    )
    score = edit * preserve if config.partial_credit else float(strict)
    return EditVerdict(float(edit), float(preserve), bool(strict), float(score))


_HINT = (
    "score shapes_edit tasks (rows of 'package:omni_rl_shapes:edit/tasks/train.jsonl' or files written by "
    "python -m omni_rl_shapes.edit.make_tasks), whose metadata carries kind, edit, target_objects, untouched, fixed"
)


def _check(meta: Mapping[str, Any], prompt: str) -> None:
    missing = [k for k in REQUIRED_FIELDS if k not in meta]
    if missing:
        raise RuntimeFailure(
            f"the shapes_edit reward cannot score prompt {prompt!r}: its row lacks {', '.join(missing)}", hint=_HINT
        )


class ShapesEditReward:
    """Scores edited images against their tasks: one float in [0, 1] per sample plus ``edit``, ``preserve`` and
    ``strict``. Reads the condition images (each sample's source) to locate the untouched objects."""

    reads_conditions = True

    def __init__(self, config: ShapesEditRewardConfig | None = None) -> None:
        self.config = config if config is not None else ShapesEditRewardConfig()

    def __call__(
        self,
        images: np.ndarray,
        prompts: Sequence[str],
        metadata: Sequence[Mapping[str, Any]] = (),
        conditions: Sequence[tuple[np.ndarray, ...]] = (),
    ) -> RewardResult:
        images = np.asarray(images)
        if images.ndim != 4 or images.shape[-1] != 3 or images.dtype != np.uint8:
            raise ValueError(f"expected uint8 images of shape (N, H, W, 3), got {images.dtype} {images.shape}")
        n = len(images)
        if len(prompts) != n or len(metadata) != n:
            raise ValueError(f"{n} images but {len(prompts)} prompts and {len(metadata)} metadata rows")
        scores = np.zeros(n)
        details = {k: np.zeros(n) for k in (*SUB_SCORES, "strict")}
        for i, (image, prompt, meta) in enumerate(zip(images, prompts, metadata, strict=True)):
            _check(meta, prompt)
            given = conditions[i] if i < len(conditions) else ()
            source = np.asarray(given[0], dtype=np.uint8) if given else None
            verdict = score_edit(image, meta, self.config, source)
            scores[i] = verdict.score
            details["edit"][i] = verdict.edit
            details["preserve"][i] = verdict.preserve
            details["strict"][i] = float(verdict.strict)
        return RewardResult(scores=scores, details=details)
