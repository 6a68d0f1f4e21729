"""The policy's moving weights as a versioned state: what a rollout worker receives after each update, and what
a policy worker keeps of older versions to re-score a stale batch with the weights that sampled it.

The state is every trainable parameter (the LoRA tensors, or all transformer weights under full fine-tuning) and
every frozen LoRA weight (a loss's extra adapters, such as DiffusionNFT's "old", which samples): by name, whole,
on the CPU. The frozen base weights never move, so they are never sent.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import attrs
import torch

from omni_rl.rundir import checkpoint


@attrs.frozen
class WeightsState:
    """A weights version: ``trainable`` and ``adapters`` tensors by name (CPU), ``version`` = the training step
    whose update produced them (0: the initial weights)."""

    version: int
    trainable: dict[str, torch.Tensor]
    adapters: dict[str, torch.Tensor]

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.trainable.values(), *self.adapters.values()))


def capture(model: Any, version: int) -> WeightsState:
    """A CPU copy of the model's moving weights (not sharded: FSDP2 with rollout workers is refused)."""
    transformer = model.transformer
    trainable = {n: p.detach().to("cpu", copy=True) for n, p in transformer.named_parameters() if p.requires_grad}
    adapters = {n: t.detach().to("cpu", copy=True) for n, t in checkpoint.frozen_lora(transformer).items()}
    return WeightsState(version=version, trainable=trainable, adapters=adapters)


def apply(model: Any, state: WeightsState) -> None:
    """Copy ``state`` into the model (names must match exactly: the same model, LoRA and adapters)."""
    source = f"weights version {state.version}"
    transformer = model.transformer
    # the trainable names of the policy are the LoRA names of a rollout copy whose adapters do not train
    targets = {n: p for n, p in transformer.named_parameters() if n in state.trainable}
    missing = sorted(set(state.trainable) - set(targets))
    if missing:
        raise ValueError(f"{source} does not match the model: missing {missing[:3]}")
    with torch.no_grad():
        for name, target in targets.items():
            target.copy_(state.trainable[name].to(target.device, target.dtype))
    if state.adapters:
        checkpoint.apply_frozen_adapters(transformer, state.adapters, source)


@contextlib.contextmanager
def swapped(model: Any, state: WeightsState | None) -> Iterator[None]:
    """Within the block the model holds ``state``; afterwards exactly the weights it had (None: no change)."""
    if state is None:
        yield
        return
    current = capture(model, -1)
    apply(model, state)
    try:
        yield
    finally:
        apply(model, current)
