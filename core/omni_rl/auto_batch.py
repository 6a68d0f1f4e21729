"""``"auto"`` batch sizes: the largest batch that fits in the device's memory, found by a short probe.

A rollout's ``batch_size`` (samples per transformer call) and the update's ``micro_batch`` (samples per
forward/backward) trade memory for speed, and the best value depends on the model, the GPU and the image size, so
users either guess low (a GPU left half idle) or high (an OOM after start-up). ``"auto"`` runs the real work once
per size on a GPU: :func:`largest_fitting` tries the whole batch first, halves on
``torch.cuda.OutOfMemoryError`` until a size fits, then bisects between the last size that fitted and the first
that did not. Each try is one forward (rollout: plus the VAE decode; update: plus the backward), a few seconds at
most, and the answer is cached per (model, device, shape) by :class:`AutoBatchCache` so a run probes once.

Explicit numbers are never probed or changed. On the CPU ``"auto"`` does not probe (host memory is rarely the
limit and an OOM there is not recoverable): the rollout takes the whole request in one call and the update the
whole local batch in one micro-batch (:data:`CPU_RULE`). Chunking changes only the float rounding of batched
matmuls, so a run with ``"auto"`` gives exactly the images of a run with the explicit size it resolved to, which
is logged (``rollout/batch_size``, ``actor/micro_batch``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Hashable
from typing import Literal

import torch

from omni_rl.errors import RuntimeFailure

AUTO = "auto"
#: what ``"auto"`` means where nothing is probed (docs/config.md)
CPU_RULE = "the whole batch in one call (no probe on the CPU)"

BatchSize = int | Literal["auto"]

_log = logging.getLogger(__name__)


def is_auto(value: object) -> bool:
    return value == AUTO


def probes_on(device: torch.device | str) -> bool:
    """Whether ``"auto"`` probes on ``device``: CUDA only (where OOM is recoverable and memory is the limit)."""
    return torch.device(device).type == "cuda"


def eager_forwards(model: object) -> contextlib.AbstractContextManager[object]:
    """The model's optional ``eager_forwards()`` context (no CUDA graphs during a probe), or nothing."""
    member = getattr(model, "eager_forwards", None)
    return member() if callable(member) else contextlib.nullcontext()


def _is_oom(error: BaseException) -> bool:
    return isinstance(error, torch.cuda.OutOfMemoryError)


def _release() -> None:
    """Drop what a failed try left cached, so the next (smaller) try sees the memory it would in a real run."""
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def largest_fitting(try_size: Callable[[int], None], upper: int, what: str) -> int:
    """The largest ``b`` in ``1..upper`` for which ``try_size(b)`` does not raise an out-of-memory error.

    Assumes memory grows with the size (if ``b`` fits, every smaller size fits): the whole ``upper`` first (most
    runs fit and pay one try), then halving down to a size that fits, then bisection up to the first size that
    does not, about 2·log2(upper) tries in the worst case. Other errors propagate. Raises RuntimeFailure when even
    one sample does not fit."""
    if upper < 1:
        raise ValueError(f"upper must be >= 1, got {upper}")
    fits: int | None = None
    fails = upper + 1
    size = upper
    while fits is None:
        try:
            try_size(size)
            fits = size
        except Exception as error:
            if not _is_oom(error):
                raise
            _release()
            fails = size
            if size == 1:
                raise RuntimeFailure(
                    f"{what}: one sample does not fit in the device's memory",
                    hint="turn on the model's memory options (gradient_checkpointing, offloading, bfloat16), or "
                    "use a smaller image size",
                ) from error
            size = max(1, size // 2)
    while fails - fits > 1:
        middle = (fits + fails) // 2
        try:
            try_size(middle)
            fits = middle
        except Exception as error:
            if not _is_oom(error):
                raise
            _release()
            fails = middle
    return fits


class AutoBatchCache:
    """Resolved ``"auto"`` sizes per (model, device, shape) key, each probed once and logged once."""

    def __init__(self, what: str) -> None:
        #: how the log line names the option ("[rollout] batch_size")
        self.what = what
        #: key -> (size, whether memory limited it); a size that was just the whole request, not a limit
        self.sizes: dict[Hashable, tuple[int, bool]] = {}
        self._logged: set[Hashable] = set()

    def resolve(self, key: Hashable, device: torch.device | str, upper: int, try_size: Callable[[int], None]) -> int:
        """The size for a request of ``upper`` samples: on CUDA the cached probe's answer for ``key`` (probed
        again only when a larger request comes and the earlier answer was not a memory limit), never more than
        ``upper``; elsewhere ``upper`` itself (:data:`CPU_RULE`)."""
        if not probes_on(device):
            if key not in self._logged:
                self._logged.add(key)
                _log.warning("%s = %r: %d, on %s: %s", self.what, AUTO, upper, torch.device(device), CPU_RULE)
            return upper
        cached = self.sizes.get(key)
        if cached is not None and (cached[1] or cached[0] >= upper):
            return min(cached[0], upper)
        size = largest_fitting(try_size, upper, self.what)
        self.sizes[key] = (size, size < upper)
        _log.warning(
            "%s = %r resolved to %d, probed on %s (largest of %d that fits)", self.what, AUTO, size, device, upper
        )
        return size
