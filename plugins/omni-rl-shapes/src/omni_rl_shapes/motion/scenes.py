"""Shapes in motion: the scene grammar in time, what a clip prompt may ask for and the parser back from text.

A motion scene is a still scene of the shapes grammar (:mod:`scenes`) whose objects all move one way over the
clip. Two prompt kinds, both parsed back exactly:

* ``single``:   "a red circle moving to the right" (to the right / to the left / up / down)
* ``relation``: "a blue square above a green triangle, both moving down": the relation holds in every frame
  because both objects move together

Counting and position prompts are left out on purpose: "two red circles moving up" makes identity across frames
ambiguous (which circle is which), and "on the left, moving right" contradicts itself by the last frame.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import attrs

from omni_rl_shapes.scenes import COLORS, RELATIONS, SHAPES, Obj, Scene, parse_prompt, related, single

#: directions and their prompt phrases; the unit vector (dx, dy) of each in image coordinates (y down)
DIRECTIONS: dict[str, str] = {"right": "to the right", "left": "to the left", "up": "up", "down": "down"}
VECTORS: dict[str, tuple[float, float]] = {
    "right": (1.0, 0.0),
    "left": (-1.0, 0.0),
    "up": (0.0, -1.0),
    "down": (0.0, 1.0),
}


@attrs.frozen
class MotionScene:
    """A still scene (``single`` or ``relation``) and the direction every object of it moves."""

    still: Scene = attrs.field()
    direction: str = attrs.field(validator=attrs.validators.in_(tuple(DIRECTIONS)))

    @still.validator
    def _kinds(self, attribute: attrs.Attribute, value: Scene) -> None:
        if value.kind not in ("single", "relation"):
            raise ValueError(f"motion scenes are single or relation scenes, got {value.kind}")

    @property
    def prompt(self) -> str:
        phrase = DIRECTIONS[self.direction]
        if self.still.kind == "relation":
            return f"{self.still.prompt}, both moving {phrase}"
        return f"{self.still.prompt} moving {phrase}"

    @property
    def objects(self) -> tuple[Obj, ...]:
        return self.still.objects


def all_motion_scenes() -> Iterator[MotionScene]:
    """Every motion scene of the grammar, in a fixed order: 48 single and 1728 relation prompts."""
    objects = [Obj(c, s) for c in COLORS for s in SHAPES]
    for direction in DIRECTIONS:
        for o in objects:
            yield MotionScene(single(o.color, o.shape), direction)
    for direction in DIRECTIONS:
        for r in RELATIONS:
            for a in objects:
                for b in objects:
                    if a.color != b.color:
                        yield MotionScene(related(a, r, b), direction)


_PHRASE_TO_DIRECTION = {phrase: d for d, phrase in DIRECTIONS.items()}
_DIRECTION = "|".join(DIRECTIONS.values())
_SINGLE = re.compile(rf"^(?P<still>.+?) moving (?P<dir>{_DIRECTION})$")
_BOTH = re.compile(rf"^(?P<still>.+?), both moving (?P<dir>{_DIRECTION})$")


def parse_motion_prompt(prompt: str) -> MotionScene:
    """The motion scene a clip prompt asks for; ``ValueError`` when it is outside the motion grammar."""
    text = " ".join(prompt.lower().strip().rstrip(".").split())
    match = _BOTH.match(text) or _SINGLE.match(text)
    if match is None:
        raise ValueError(f"prompt {prompt!r} is not in the shapes-in-motion grammar")
    still = parse_prompt(match["still"])
    if (still.kind == "relation") != (match.re is _BOTH):
        raise ValueError(f"prompt {prompt!r}: a relation moves with 'both moving', a single object with 'moving'")
    return MotionScene(still, _PHRASE_TO_DIRECTION[match["dir"]])
