"""Options of the ``shapes_edit`` reward: the shapes verifier's tolerances plus the preservation tolerances.

Kept free of numpy so ``hooks.py`` can hand the class to the registry without importing the verifier.
"""

from __future__ import annotations

import attrs
from attrs import validators as v


@attrs.frozen(kw_only=True)
class ShapesEditRewardConfig:
    """``[[reward]] name = "shapes_edit"`` options (``[benchmark]`` options of ``shapes_edit`` too).

    The verifier fields mean what they mean for ``shapes``; the two tolerances say how far an object the
    instruction does not touch may drift and still count as preserved. The defaults score every shipped task's
    rendered target as strict at the shipped 32 px (and at any larger size).
    """

    #: score = edit x preserve (graded); false: 1 only for a strict output
    partial_credit: bool = True
    color_threshold: float = attrs.field(default=110.0, validator=[v.gt(0.0), v.le(250.0)])
    min_area: float = attrs.field(default=0.01, validator=[v.gt(0.0), v.lt(0.5)])
    position_margin: float = attrs.field(default=0.05, validator=[v.ge(0.0), v.lt(0.5)])
    min_shape_iou: float = attrs.field(default=0.6, validator=[v.ge(0.0), v.le(1.0)])
    #: an untouched object is preserved when its box centre moved at most this far (fraction of the image side)
    position_tolerance: float = attrs.field(default=0.1, validator=[v.gt(0.0), v.lt(0.5)])
    #: ... and its box side changed by at most this fraction of the source's side
    size_tolerance: float = attrs.field(default=0.3, validator=[v.gt(0.0), v.lt(1.0)])


@attrs.frozen(kw_only=True)
class ShapesEditBenchmarkConfig(ShapesEditRewardConfig):
    """``omni-rl eval --benchmark shapes_edit`` options: the reward's, plus which held-out split to score."""

    #: "val" (the number RL runs log) or "test" (held out from model selection too)
    split: str = attrs.field(default="val", validator=v.in_(("val", "test")))
