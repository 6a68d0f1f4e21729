"""FSDP2 (``[cluster] strategy = "fsdp2"``): the transformer sharded across the worker group with ``fully_shard``.

Each transformer block is one FSDP unit, the transformer itself the root unit (its own weights: embeddings, final
norm and projection). At rest every parameter is a DTensor holding 1/N of the weight; a forward all-gathers one
unit at a time and frees it after, a backward all-gathers again and reduce-scatters the unit's gradients, so each
worker keeps 1/N of the weights, gradients and optimizer state. AdamW steps the local shards.

The update's math is the DDP one: every worker weights its samples by the *global* mini-batch size, so the
gradients must be summed across workers, not averaged: FSDP's gradient divide factor is set to 1 and the
reduction forced to a plain sum (which gloo supports too).

Every forward and backward of the sharded transformer is a collective, so the workers must run the same number
of them in the same order. The worker group gives every worker the same number of samples per rollout (even
shards for training, padding for validation), and the update engines pad the micro-batches of a mini-batch to the
largest count across workers with zero-weight passes (see :func:`max_across_workers`).

Tensors that leave the worker (checkpoints, the user-facing LoRA or transformer) are gathered to full tensors on
every worker, one at a time, and written by rank 0 only (:func:`gather_state`); they are read back whole and each
worker keeps its shard (:func:`copy_full_into`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

#: The strategies of ``[cluster] strategy``.
STRATEGIES = ("ddp", "fsdp2")


def is_sharded(tensor: Any) -> bool:
    """Whether ``tensor`` is a DTensor (a parameter or optimizer state sharded by FSDP2)."""
    from torch.distributed.tensor import DTensor

    return isinstance(tensor, DTensor)


def writes_files() -> bool:
    """True in the process that writes gathered tensors: rank 0 of the worker group, or any process outside one."""
    import torch.distributed as dist

    return not (dist.is_available() and dist.is_initialized()) or dist.get_rank() == 0


def full_tensor(tensor: torch.Tensor) -> torch.Tensor:
    """A detached, contiguous CPU copy of the whole tensor; a collective (all-gather) for a sharded one, so
    every worker must call it for the same tensors in the same order."""
    if is_sharded(tensor):
        tensor = tensor.full_tensor()  # type: ignore[attr-defined]
    return tensor.detach().cpu().contiguous()


def gather_state(tensors: Mapping[str, torch.Tensor], keep: bool | None = None) -> dict[str, torch.Tensor] | None:
    """Full CPU copies of ``tensors`` for writing; None in the processes that do not write.

    ``keep`` says whether this process writes; by default rank 0 of the worker group does (:func:`writes_files`).
    Collective when any tensor is sharded: every worker calls it with the same names in the same order. Tensors
    are gathered one at a time, and the processes that do not write drop each copy at once, so the peak there is
    one whole tensor.
    """
    keep = writes_files() if keep is None else keep
    out: dict[str, torch.Tensor] = {}
    for name, tensor in tensors.items():
        full = full_tensor(tensor)
        if keep:
            out[name] = full
    return out if keep else None


def copy_full_into(target: torch.Tensor, full: torch.Tensor) -> None:
    """``target.copy_(full)`` where ``full`` is the whole tensor and ``target`` may be a shard of it (each worker
    keeps its own chunk; no communication)."""
    value = full.to(target.device, target.dtype)
    if is_sharded(target):
        value = shard_like(value, target)
    with torch.no_grad():
        target.copy_(value)


def shard_like(full: torch.Tensor, like: Any) -> Any:
    """``full`` split the way the DTensor ``like`` is (this worker's chunk, from its own copy: no communication)."""
    from torch.distributed.tensor import distribute_tensor

    return distribute_tensor(full.to(like.device, like.dtype), like.device_mesh, like.placements, src_data_rank=None)


def fsdp_units(model: Any) -> list[torch.nn.Module]:
    """The modules sharded as their own FSDP unit before the transformer itself.

    A model may say with an optional ``fsdp_units()`` method; otherwise every entry of the transformer's
    ``*blocks`` module lists (diffusers' ``transformer_blocks``, ``single_transformer_blocks``) is one unit.
    """
    custom = getattr(model, "fsdp_units", None)
    if custom is not None:
        return list(custom())
    units: list[torch.nn.Module] = []
    for name, child in model.transformer.named_children():
        if name.endswith("blocks") and isinstance(child, torch.nn.ModuleList):
            units.extend(child)
    return units


def shard_transformer(model: Any, *, device: str, world_size: int, mixed_precision: str) -> int:
    """``fully_shard`` each unit, then the transformer (root); gradients are summed, not averaged.

    Returns the number of FSDP units. Call after the model, its LoRA and the loss's extra adapters exist, and
    before the optimizer is built (it must see the sharded parameters).
    """
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import FSDPModule, fully_shard

    mesh = init_device_mesh("cuda" if device.startswith("cuda") else "cpu", (world_size,))
    policies = mixed_precision_policies(mixed_precision)
    unit_kwargs: dict[str, Any] = {"mesh": mesh}
    root_kwargs: dict[str, Any] = {"mesh": mesh}
    if policies is not None:
        unit_kwargs["mp_policy"], root_kwargs["mp_policy"] = policies
    transformer = model.transformer
    units = fsdp_units(model)
    for unit in units:
        fully_shard(unit, **unit_kwargs)
    # The root reshards after forward too (FSDP's default keeps it gathered until the backward, which never comes
    # after a rollout's no-grad forward): at rest every parameter is a shard, whatever ran last.
    fully_shard(transformer, reshard_after_forward=True, **root_kwargs)
    for module in transformer.modules():
        if isinstance(module, FSDPModule):
            # The loss already divides by the global mini-batch: sum the workers' gradients (DDP's reduction).
            module.set_gradient_divide_factor(1.0)
            # A plain SUM collective (no PREMUL_SUM / AVG): gloo has neither, and a factor of 1 needs no scaling.
            module.set_force_sum_reduction_for_comms(True)
    return len(units) + 1


def mixed_precision_policies(mixed_precision: str) -> tuple[Any, Any] | None:
    """``(units, root)``: the FSDP2 mixed-precision policies of the blocks and of the transformer itself, or
    None for ``mixed_precision = "no"`` (everything in the model's own dtype).

    The blocks, nearly all of the compute, run in bfloat16: their weights are all-gathered in bfloat16, their
    inputs cast to it, and their outputs cast back to float32 (``output_dtype``) for the root's own layers.

    The root keeps its weights (patch, time and text embeddings, final norm and projection: a small part of the
    compute) in the model's dtype and does not cast its inputs (``cast_forward_inputs=False``). FSDP's default
    would cast every floating-point input of the transformer to bfloat16, the timestep too: sigma x 1000 in
    bfloat16 keeps 8 significant bits, so above 512 it moves in steps of 4 (999 and 998 both become 1000), and
    neighbouring sampling steps would get the same time embedding, the sinusoids' high frequencies a wrong phase.
    The same holds for any per-sample scalar a model passes (a guidance strength, position ids).
    """
    from torch.distributed.fsdp import MixedPrecisionPolicy

    if mixed_precision == "no":
        return None
    if mixed_precision != "bf16":
        raise ValueError(f"unknown mixed_precision {mixed_precision!r}")
    units = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32, output_dtype=torch.float32)
    root = MixedPrecisionPolicy(reduce_dtype=torch.float32, cast_forward_inputs=False)
    return units, root


def max_across_workers(counts: Sequence[int], device: str) -> list[int]:
    """Element-wise maximum of ``counts`` over the worker group (one small all-reduce)."""
    import torch.distributed as dist

    tensor = torch.as_tensor(list(counts), dtype=torch.int64, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return [int(v) for v in tensor.tolist()]
