"""``[optim] micro_batch = "auto"`` for both update engines: the probe of one micro-batch's peak memory.

The update's peak is one micro-batch's forward with gradients plus its backward (the activations of the trained
pass), with a no-grad forward of the reference or old view beside it when the loss asks for one. Each probe runs
exactly that on the first ``b`` samples the worker holds, then drops the gradients, so it changes neither the
weights, the optimizer nor any RNG: the update that follows is the one of the explicit size it resolved to.
omni_rl.auto_batch does the search, the caching and the CPU rule (the whole local batch, no probe).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs
import torch

from omni_rl.auto_batch import AutoBatchCache, eager_forwards, is_auto
from omni_rl.config.schema import OptimConfig
from omni_rl.protocols import DiffusionModel

if TYPE_CHECKING:
    from omni_rl.engine.stepping import UpdateStats


class AutoMicroBatch:
    """Resolves an engine's ``[optim]`` for each update: unchanged with an explicit ``micro_batch``, else with
    ``micro_batch`` set to the size that fits for this batch's shape (probed once per shape)."""

    def __init__(self, optim: OptimConfig) -> None:
        #: the section as configured (``micro_batch`` may be "auto")
        self.configured = optim
        self.auto = is_auto(optim.micro_batch)
        self.cache = AutoBatchCache("[optim] micro_batch")
        #: the last resolved size (None while explicit)
        self.resolved: int | None = None

    def optim_for(
        self, model: DiffusionModel, shape: tuple[int, ...], samples: int, try_size: Callable[[int], None]
    ) -> OptimConfig:
        """The section this update runs with; ``try_size(b)`` runs one micro-batch of ``b`` samples' peak."""
        if not self.auto:
            return self.configured
        key = (type(model).__name__, getattr(model, "pipeline_path", id(model)), shape)

        def probe(b: int) -> None:
            try:
                with eager_forwards(model):
                    try_size(b)
            finally:
                for param in model.trainable_parameters():
                    param.grad = None

        # a micro-batch never spans two optimizer steps: no size above the mini-batch is ever run
        upper = min(samples, self.configured.mini_batch) if self.configured.mini_batch else samples
        self.resolved = self.cache.resolve(key, model.device, max(1, upper), probe)
        return attrs.evolve(self.configured, micro_batch=self.resolved)

    def report(self, stats: UpdateStats) -> UpdateStats:
        """``stats`` with the resolved size as a per-worker mean (``actor/micro_batch``)."""
        if self.resolved is not None:
            stats.sums["micro_batch"] = float(self.resolved)
            stats.counts["micro_batch"] = 1
        return stats


def backward_probe(forward: Callable[[], torch.Tensor], side: Callable[[], object] | None = None) -> None:
    """One trained pass (``forward()`` under grad, then backward of its sum) and an optional no-grad ``side``
    forward (reference / old view), the peak of a micro-batch."""
    with torch.enable_grad():
        out = forward()
        out.float().sum().backward()
    del out
    if side is not None:
        with torch.no_grad():
            side()
