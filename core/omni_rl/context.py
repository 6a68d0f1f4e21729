"""What a factory receives besides its own options."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs


@attrs.frozen(kw_only=True)
class BuildContext:
    """Build-time facts shared by every component of a run.

    ``device`` is a torch device string (``"cpu"``, ``"cuda:0"``); ``run_dir`` is where the run writes (None
    outside a run, e.g. in a notebook); ``seed`` is the run seed; ``registry`` lets a component build another
    component by name (a preset-aware reward that wraps another reward, say).
    """

    device: str = "cpu"
    seed: int = 0
    run_dir: Path | None = None
    registry: Any = None
    #: Worker rank and world size inside a distributed worker group (0 / 1 elsewhere).
    rank: int = 0
    world_size: int = 1
    #: the config path of the section being built, e.g. "$.reward[1]" or "$.eval_reward[0]" ("" outside a config
    #: file): a factory names ``{section}.options.<option>`` in the errors it raises after pass 2
    section: str = ""
