"""Options of the ``rloo`` advantage (an attrs class: omni-rl checks ``[advantage] options`` against it and reports
each problem with its ``$.advantage.options.<key>`` path). Torch-free, so ``omni-rl plugins`` stays fast."""

from __future__ import annotations

from typing import Literal

import attrs

from omni_rl.validators import non_negative_finite


@attrs.frozen(kw_only=True)
class RLOOConfig:
    """``[advantage] name = "rloo"``.

    ``scale``: ``"none"`` keeps the leave-one-out advantage in reward units (the RLOO paper); ``"group_std"``
    divides it by its group's standard deviation plus ``eps``, so prompts whose rewards barely differ are not
    drowned out by those whose rewards differ a lot (as GRPO does).
    """

    scale: Literal["none", "group_std"] = attrs.field(
        default="none", validator=attrs.validators.in_(("none", "group_std"))
    )
    #: added to the group's std before dividing (``scale = "group_std"``): a group of equal rewards gets 0, not NaN
    eps: float = attrs.field(default=1e-4, converter=float, validator=non_negative_finite)
