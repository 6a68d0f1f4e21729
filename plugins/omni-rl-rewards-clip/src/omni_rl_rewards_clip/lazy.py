"""Models loaded on first use, once per process: what the model-based rewards here and GenEval's scorer share.

The weights are loaded on the first access of :attr:`LazyModels.loaded`, not in ``__init__``: building stays cheap
(config checks, ``omni-rl plugins``), the device is chosen in the process that scores (a Ray reward actor sees only
its own GPU), and an instance pickled to another process reloads there instead of shipping gigabytes of tensors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from omni_rl_rewards_clip.loading import Owner, check_source, pick_device


class LazyModels:
    """Holds ``config`` (with a ``device`` option) and the models :meth:`load` returns, loaded on first use.

    ``sources`` names the options holding a hub id or a local path: a local path that does not exist fails when the
    instance is built, not at the first batch. Errors name the options by their config path through ``owner``
    (``$.reward[1].options.model``).
    """

    def __init__(self, config: Any, ctx: Any, name: str, sources: Sequence[str]) -> None:
        self.config = config
        self.ctx_device: str = getattr(ctx, "device", "cpu")
        self.owner = Owner.of(name, ctx)
        self._loaded: Any = None
        for option in sources:
            check_source(getattr(config, option), reward=self.owner, option=option)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_loaded"] = None
        return state

    @property
    def device(self) -> str:
        """``config.device``, with "auto" resolved in this process (the context's accelerator, cuda, or cpu)."""
        return pick_device(self.config.device, self.ctx_device)

    @property
    def loaded(self) -> Any:
        """What :meth:`load` returned, loaded on first access and cached on this instance."""
        if self._loaded is None:
            self._loaded = self.load()
        return self._loaded

    def load(self) -> Any:
        raise NotImplementedError
