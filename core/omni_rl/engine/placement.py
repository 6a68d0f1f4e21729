"""Where each record lives, and the one function that moves a whole record (docs/placement.md).

A training step's data lives in two places, the *host* (CPU memory of the worker process) and the worker's
*device* (its GPU, or the CPU when it has none):

- rollout outputs (:class:`~omni_rl.batch.RolloutBatch`: images, final latents, conditioning, the trajectory)
  are moved to the host once, right after sampling (:func:`to_host` in ``runtime.worker.sample``): they wait there
  for the rewards and the update without holding GPU memory, and they cross processes (Ray) from there;
- rewards, advantages, the loss's extras and the rollout correction's inputs and weights are host tensors;
- the update moves one micro-batch at a time to the device, as one record
  (:class:`~omni_rl.engine.micro_batch.MicroBatch` through :func:`to_device`), and gathers what it keeps across
  micro-batches (recomputed old log-probs and old means) back to the host;
- weights sent to rollout workers are host tensors (``runtime.weights``).

Code never moves a record field by field at each use: :func:`to_device` and :func:`to_host` are the boundary,
and :mod:`omni_rl.engine.placement_guard` checks in CPU tests that nothing crosses it any other way.
"""

from __future__ import annotations

from typing import Any, TypeVar

import attrs
import torch

from omni_rl.engine import placement_guard

T = TypeVar("T")

#: where records wait between the rollout and the update
HOST = torch.device("cpu")


def move(record: T, device: torch.device | str, *, non_blocking: bool = False) -> T:
    """``record`` with every tensor in it on ``device``: tensors, attrs instances (fields moved, the rest kept),
    dicts, lists and tuples, recursively; anything else is returned as is. Tensors already there are not copied."""
    if isinstance(record, torch.Tensor):
        moved = record.to(device, non_blocking=non_blocking)
        if moved is record and placement_guard.enabled():
            moved = moved.view_as(moved)  # the guard's places live on tensor objects: a move makes a new one
        return moved  # type: ignore[return-value]
    if attrs.has(type(record)):
        changes = {}
        for field in attrs.fields(type(record)):
            value = getattr(record, field.name)
            moved = move(value, device, non_blocking=non_blocking)
            if moved is not value:
                changes[field.name] = moved
        return attrs.evolve(record, **changes) if changes else record  # type: ignore[misc]
    if isinstance(record, dict):
        return {k: move(v, device, non_blocking=non_blocking) for k, v in record.items()}  # type: ignore[return-value]
    if isinstance(record, (list, tuple)) and any(isinstance(v, torch.Tensor) or attrs.has(type(v)) for v in record):
        return type(record)(move(v, device, non_blocking=non_blocking) for v in record)  # type: ignore[return-value]
    return record


def to_device(record: T, device: torch.device | str) -> T:
    """The record on the worker's device, for compute. Host-to-device copies are stream-ordered, so they are
    issued ``non_blocking`` and the kernels that read them wait for them on their own."""
    target = torch.device(device)
    out = move(record, target, non_blocking=target.type == "cuda")
    placement_guard.mark(out, placement_guard.DEVICE)
    return out


def to_host(record: T) -> T:
    """The record in host memory. Device-to-host copies are issued ``non_blocking`` (into pinned memory) and
    waited for once, at the end, rather than one synchronising copy per tensor."""
    cuda = _holds_cuda(record)
    out = move(record, HOST, non_blocking=cuda)
    if cuda:
        torch.cuda.synchronize()
    placement_guard.mark(out, placement_guard.HOST_PLACE)
    return out


def _holds_cuda(record: Any) -> bool:
    found = False

    def visit(value: Any) -> None:
        nonlocal found
        if isinstance(value, torch.Tensor):
            found = found or value.is_cuda
        elif attrs.has(type(value)):
            for field in attrs.fields(type(value)):
                visit(getattr(value, field.name))
        elif isinstance(value, dict):
            for v in value.values():
                visit(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                visit(v)

    visit(record)
    return found
