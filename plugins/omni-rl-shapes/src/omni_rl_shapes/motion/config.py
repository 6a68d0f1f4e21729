"""Options of the ``shapes_motion`` reward: the still verifier's tolerances plus the motion and consistency ones.

Kept free of numpy so ``hooks.py`` can hand the class to the registry without importing the verifier.
"""

from __future__ import annotations

import attrs
from attrs import validators as v

from omni_rl_shapes.config import ShapesRewardConfig


@attrs.frozen(kw_only=True)
class ShapesMotionRewardConfig(ShapesRewardConfig):
    """``[[reward]] name = "shapes_motion"`` options.

    The defaults score every rendered clip of the motion grammar as correct and clips that move the wrong way,
    stand still, flicker or change colour well below it."""

    #: how far (fraction of the image side) an object must travel along the asked direction, first frame to last,
    #: for full motion credit; less gets proportional credit
    min_distance: float = attrs.field(default=0.12, validator=[v.gt(0.0), v.lt(1.0)])
    #: the travel may deviate from the asked direction by at most this many degrees
    max_angle: float = attrs.field(default=30.0, validator=[v.gt(0.0), v.lt(90.0)])
    #: the largest jump of an object's centre between two consecutive frames (fraction of the side): a larger one
    #: is a different object, not the same one moving
    max_jump: float = attrs.field(default=0.15, validator=[v.gt(0.0), v.le(1.0)])
