"""A CPU-only check that host and device tensors never meet in one op (``OMNI_RL_PLACEMENT_GUARD=1``).

On a CPU machine the "device" of a worker is the CPU itself, so a tensor that was never moved to the device
works by accident there and fails on the first GPU step (issue 28: the rollout's log-probs on the host minus the
recomputed ones on the GPU). This guard makes the two places distinguishable without a GPU: every tensor carries
a place, *host* or *device*, and a :class:`~torch.overrides.TorchFunctionMode` raises when one op mixes a host
tensor with a device tensor, which is what CUDA refuses.

Where places come from (the same rules as the real devices):

- :func:`omni_rl.engine.placement.to_device` marks a record *device*, :func:`omni_rl.engine.placement.to_host`
  marks it *host*;
  ``Tensor.to(<a device>)`` and ``.cuda()`` give *device*, ``.cpu()`` and ``.numpy()``-born tensors give *host*;
- factories (``torch.zeros``, ``randn``, ``tensor``, ``as_tensor``, ``from_numpy`` ...) give *device* when called
  with ``device=`` and *host* without, as on a GPU worker where the default device is the CPU;
- model parameters and buffers are marked *device* when the worker has built the model (:func:`mark_module`);
- every other op's result takes the place of its inputs (device wins over unplaced, unplaced tensors are those
  made before the guard started).

Allowed mixes, as on CUDA: 0-dim host tensors (CPU scalars) with device tensors, host index tensors into a device
tensor, and copies (``copy_``, ``to``, assignments into a slice). Limits, stated: a ``.to("cpu")`` spelled with a
device argument counts as a move to the device (on a CPU machine the two are the same device), so host moves use
``.cpu()`` or :func:`~omni_rl.engine.placement.to_host`; ops inside autograd's backward are not seen (they follow the
forward's devices on their own).
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

#: the environment variable that turns the guard on in every worker process
ENV = "OMNI_RL_PLACEMENT_GUARD"
DEVICE = "device"
HOST_PLACE = "host"
_ATTR = "_omni_rl_place"

#: torch functions that build a tensor from nothing: their ``device=`` argument decides the place
_FACTORIES = {
    torch.zeros,
    torch.ones,
    torch.empty,
    torch.full,
    torch.rand,
    torch.randn,
    torch.randint,
    torch.randperm,
    torch.arange,
    torch.linspace,
    torch.tensor,
    torch.as_tensor,
    torch.from_numpy,
    torch.eye,
    torch.zeros_like,
    torch.ones_like,
    torch.empty_like,
    torch.full_like,
    torch.rand_like,
    torch.randn_like,
}
_LIKE = {torch.zeros_like, torch.ones_like, torch.empty_like, torch.full_like, torch.rand_like, torch.randn_like}
#: ops that legitimately take tensors from both places (cross-device copies)
_CROSSING = {torch.Tensor.copy_, torch.Tensor.__setitem__}


class PlacementError(RuntimeError):
    """A host tensor and a device tensor met in one op: on a GPU this op raises 'Expected all tensors to be on
    the same device'."""


def enabled() -> bool:
    return os.environ.get(ENV, "") not in ("", "0")


def place_of(tensor: torch.Tensor) -> str | None:
    return getattr(tensor, _ATTR, None)


def _set(tensor: torch.Tensor, place: str) -> None:
    with contextlib.suppress(AttributeError, RuntimeError):  # subclasses refusing attributes stay unplaced
        setattr(tensor, _ATTR, place)


def mark(record: Any, place: str) -> None:
    """Give every tensor of ``record`` (nested attrs / dict / list) the place ``place``; no-op when disabled."""
    if not enabled():
        return
    import attrs

    if isinstance(record, torch.Tensor):
        _set(record, place)
    elif attrs.has(type(record)):
        for field in attrs.fields(type(record)):
            mark(getattr(record, field.name), place)
    elif isinstance(record, dict):
        for v in record.values():
            mark(v, place)
    elif isinstance(record, (list, tuple)):
        for v in record:
            mark(v, place)


def mark_module(obj: Any) -> None:
    """Mark the parameters and buffers of every ``torch.nn.Module`` reachable from ``obj`` (the model plugin's
    object: its transformer, VAE, text encoders, a diffusers pipeline's components) as on the device."""
    if not enabled():
        return
    seen: set[int] = set()

    def visit(value: Any, depth: int) -> None:
        if id(value) in seen or depth > 3:
            return
        seen.add(id(value))
        if isinstance(value, torch.nn.Module):
            for t in list(value.parameters()) + list(value.buffers()):
                _set(t, DEVICE)
            return
        components = getattr(value, "components", None)  # a diffusers pipeline
        if isinstance(components, dict):
            for v in components.values():
                visit(v, depth + 1)
        for v in list(getattr(value, "__dict__", {}).values()):
            if isinstance(v, (torch.nn.Module,)) or hasattr(v, "components") or depth < 1:
                visit(v, depth + 1)

    visit(obj, 0)


def _moves(func: Any) -> bool:
    return func in _FACTORIES or func in (torch.Tensor.to, torch.Tensor.cpu, torch.Tensor.cuda)


def _device_arg(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether a ``Tensor.to`` call names a device (positionally or by keyword), not only a dtype."""
    if "device" in kwargs and kwargs["device"] is not None:
        return True
    for a in args[1:]:
        if isinstance(a, (str, torch.device)):
            return True
        if isinstance(a, torch.Tensor):
            return True
    return False


class PlacementGuard(TorchFunctionMode):
    """The check itself; see the module docstring for the rules."""

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        place = self._place(func, args, kwargs)
        if place is None:
            return out
        if isinstance(out, torch.Tensor) and args and out is args[0]:
            if place_of(out) == place or not _moves(func):
                return out  # an in-place op: the tensor keeps its place
            out = out.view_as(out)  # a move that is a no-op on the CPU: a new tensor object carries the new place
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                _set(t, place)
        return out

    def _place(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        if func in _FACTORIES:
            keeps = func in _LIKE or func in (torch.as_tensor, torch.tensor)  # of a tensor: its device, as on CUDA
            if keeps and kwargs.get("device") is None and args and isinstance(args[0], torch.Tensor):
                return place_of(args[0])
            return DEVICE if kwargs.get("device") is not None else HOST_PLACE
        if func is torch.Tensor.cpu or func is torch.Tensor.numpy:
            return HOST_PLACE
        if func is torch.Tensor.cuda:
            return DEVICE
        if func is torch.Tensor.to and _device_arg(func, args, kwargs):
            target = kwargs.get("device")
            if target is None:
                target = next((a for a in args[1:] if isinstance(a, (str, torch.device, torch.Tensor))), None)
            if isinstance(target, torch.Tensor):
                return place_of(target)
            return DEVICE
        tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        places = {place_of(t) for t in tensors}
        if DEVICE in places and HOST_PLACE in places and func not in _CROSSING:
            self._check_mix(func, args, tensors)
        if DEVICE in places:
            return DEVICE
        if HOST_PLACE in places:
            return HOST_PLACE
        return None

    @staticmethod
    def _check_mix(func: Any, args: tuple[Any, ...], tensors: list[torch.Tensor]) -> None:
        host = [t for t in tensors if place_of(t) == HOST_PLACE and t.ndim > 0]
        if not host:
            return  # CPU scalars mix with device tensors on CUDA too
        if func is torch.Tensor.__getitem__ and args and place_of(args[0]) == DEVICE:
            return  # host index tensors into a device tensor
        name = getattr(func, "__qualname__", getattr(func, "__name__", repr(func)))
        shapes = ", ".join(f"{place_of(t)} {tuple(t.shape)}" for t in tensors if place_of(t) is not None)
        raise PlacementError(
            f"{name} at {_caller()} mixes host and device tensors ({shapes}): on a GPU this raises 'Expected all "
            "tensors to be on the same device'. Move the whole record with omni_rl.engine.placement.to_device / "
            "to_host."
        )


def _caller() -> str:
    """file:line of the innermost frame outside torch and this module: the line that mixed the places."""
    import traceback

    for frame in reversed(traceback.extract_stack()[:-2]):
        if "/torch/" not in frame.filename and not frame.filename.endswith("placement_guard.py"):
            return f"{Path(frame.filename).name}:{frame.lineno} ({frame.name})"
    return "?"


@contextmanager
def guarded() -> Iterator[None]:
    """The guard around a block when ``OMNI_RL_PLACEMENT_GUARD`` is set (nested uses share the outer guard)."""
    if not enabled() or _active():
        yield
        return
    with PlacementGuard():
        yield


F = TypeVar("F", bound=Callable[..., Any])


def guard_method(method: F) -> F:
    """A worker method that runs under :func:`guarded` (the rollout and the update of the worker actors)."""

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with guarded():
            return method(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def _active() -> bool:
    from torch.overrides import _get_current_function_mode_stack

    return any(isinstance(m, PlacementGuard) for m in _get_current_function_mode_stack())
