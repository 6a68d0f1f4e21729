"""Speed options every diffusers model adapter shares (SD3, FLUX, Qwen-Image, Wan): each off by default, and off
changes not a bit.

- ``compile = "regional"``: ``torch.compile`` of each transformer block in place (regional compilation: the
  blocks repeat, so one compiled graph serves them all and compiling takes seconds, not the minutes a whole-model
  compile takes). A compiled forward under gradients runs other fused kernels than the same forward without them,
  so the rollout's log-probs (no grad) and the update's (grad) would differ in the last bits and the first step's
  on-policy ratio would not be exactly 1. The model therefore asks the update engine to recompute the old
  log-probs through the trained (grad) forward (:attr:`SpeedOptions.compiled`, read by
  ``omni_rl.engine.trajectory_update`` as ``old_log_probs_with_grad``), and the config refuses ``compile`` where the old
  log-probs would not be recomputed (``[optim] recompute_old_log_probs = false`` or ``[rollout_correction] mode =
  "bypass"``).
- ``attention_backend``: the SDPA kernel of every transformer call (``torch.nn.attention.sdpa_kernel``):
  ``"flash"``, ``"cudnn"``, ``"efficient"`` or ``"math"``; ``"default"`` lets torch pick. The fused kernels are
  CUDA-only, so they are refused on a CPU worker.
- ``vae_tiling`` / ``vae_slicing``: diffusers' ``enable_tiling`` (decode in overlapping tiles: large images in
  bounded memory; changes pixels slightly at tile seams) and ``enable_slicing`` (decode one image at a time:
  bounded memory for large rollout chunks).
- ``vae_channels_last``: the VAE's convolution weights in channels-last layout (``channels_last`` for 2-D
  convolutions, ``channels_last_3d`` for the 3-D ones of the Qwen-Image and Wan VAEs), the layout cuDNN's fastest
  convolution kernels use on tensor-core GPUs; the decode's inputs follow their weights' layout. The same math in
  another memory order: equal to float rounding.

- ``cuda_graphs``: the no-grad transformer calls (sampling, validation, the reference's no-grad forward) replay
  CUDA graphs captured once per shape and LoRA view (:mod:`omni_rl_pipelines.cuda_graphs`); calls under gradients stay
  eager. CUDA-only, so refused on a CPU worker; like ``compile`` it has the old log-probs recomputed through the
  trained forward, and the config refuses it where they would not be (and under FSDP2, whose forwards gather the
  weights into new memory each call).
"""

from __future__ import annotations

import contextlib
from typing import Any, Literal

import attrs

from omni_rl.errors import ConfigError

ATTENTION_BACKENDS: tuple[str, ...] = ("default", "flash", "cudnn", "efficient", "math")
COMPILE_MODES: tuple[str, ...] = ("off", "regional")


@attrs.frozen(kw_only=True, slots=False)
class SpeedOptions:
    """The shared speed options of ``[model] options`` (the model configs subclass this, with
    :class:`~omni_rl_pipelines.options.PipelineOptions`; not slotted, so it combines with the other option bases)."""

    #: "regional": torch.compile each transformer block (the old log-probs are then recomputed with gradients on)
    compile: Literal["off", "regional"] = attrs.field(default="off", validator=attrs.validators.in_(COMPILE_MODES))
    #: SDPA kernel around every transformer call; "default": torch's choice. Non-"math" kernels need CUDA
    attention_backend: Literal["default", "flash", "cudnn", "efficient", "math"] = attrs.field(
        default="default", validator=attrs.validators.in_(ATTENTION_BACKENDS)
    )
    #: decode latents in overlapping tiles (diffusers' vae.enable_tiling): bounded memory for large images
    vae_tiling: bool = False
    #: decode one image at a time (diffusers' vae.enable_slicing): bounded memory for large rollout chunks
    vae_slicing: bool = False
    #: the VAE's convolutions in channels-last memory layout (cuDNN's tensor-core kernels prefer it)
    vae_channels_last: bool = False
    #: replay CUDA graphs for the no-grad transformer calls, one per shape (the old log-probs are then recomputed
    #: with gradients on). Needs CUDA
    cuda_graphs: bool = False

    @property
    def compiled(self) -> bool:
        return self.compile != "off"

    @property
    def old_log_probs_with_grad(self) -> bool:
        """Whether the rollout's transformer calls run other code than the update's trained forward (a compiled or
        graphed no-grad call), so the old log-probs must be recomputed through the trained forward."""
        return self.compiled or self.cuda_graphs


def _sdpa_backend(name: str) -> Any:
    from torch.nn.attention import SDPBackend

    return {
        "flash": SDPBackend.FLASH_ATTENTION,
        "cudnn": SDPBackend.CUDNN_ATTENTION,
        "efficient": SDPBackend.EFFICIENT_ATTENTION,
        "math": SDPBackend.MATH,
    }[name]


def attention_context(options: SpeedOptions) -> contextlib.AbstractContextManager[Any]:
    """The context every transformer call runs in: the chosen SDPA kernel, or nothing for "default"."""
    if options.attention_backend == "default":
        return contextlib.nullcontext()
    from torch.nn.attention import sdpa_kernel

    return sdpa_kernel(_sdpa_backend(options.attention_backend))


def check_device(options: SpeedOptions, device: Any, label: str) -> None:
    """Refuse a fused attention kernel or CUDA graphs on a CPU worker (they would fail at the first transformer
    call)."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        return
    if options.cuda_graphs:
        raise ConfigError(
            f"cuda_graphs = true needs a CUDA GPU, but this {label} model runs on {device}",
            hint="set cuda_graphs = false on the CPU, or run the workers on GPUs ([cluster] gpus_per_worker)",
        )
    if options.attention_backend not in ("default", "math"):
        raise ConfigError(
            f'attention_backend = "{options.attention_backend}" needs a CUDA GPU, but this {label} model runs on '
            f"{device}",
            hint='use attention_backend = "default" or "math" on the CPU, or run the workers on GPUs '
            "([cluster] gpus_per_worker)",
        )


def compile_blocks(transformer: Any) -> int:
    """Regional compilation: ``torch.compile`` every block of the transformer's ``*blocks`` ModuleLists in place
    (SD3's ``transformer_blocks``, FLUX's double and single blocks, Qwen-Image's blocks); returns how many."""
    import torch

    count = 0
    for name, child in transformer.named_children():
        if name.endswith("blocks") and isinstance(child, torch.nn.ModuleList):
            for block in child:
                block.compile()
                count += 1
    return count


def to_channels_last(module: Any) -> None:
    """4-D weights to ``channels_last`` and 5-D ones to ``channels_last_3d``, in place. (``Module.to`` with a memory
    format refuses a module that mixes ranks, as the Qwen-Image and Wan VAEs' causal 3-D convolutions do.)"""
    import torch

    formats = {4: torch.channels_last, 5: torch.channels_last_3d}
    with torch.no_grad():
        for parameter in module.parameters():
            if parameter.dim() in formats:
                parameter.data = parameter.data.contiguous(memory_format=formats[parameter.dim()])


def graphed_calls(options: SpeedOptions) -> Any:
    """The :class:`~omni_rl_pipelines.cuda_graphs.GraphedCalls` that serves the model's no-grad transformer calls, or
    None when ``cuda_graphs`` is off (calls then go straight to the module)."""
    if not options.cuda_graphs:
        return None
    from omni_rl_pipelines.cuda_graphs import CudaGraphBackend, GraphedCalls

    return GraphedCalls(CudaGraphBackend())


def apply_speed_options(options: SpeedOptions, transformer: Any, vae: Any, device: Any, label: str) -> None:
    """Turn on what the options ask for (after LoRA is injected, so the compiled blocks include it)."""
    check_device(options, device, label)
    if options.vae_tiling:
        vae.enable_tiling()
    if options.vae_slicing:
        vae.enable_slicing()
    if options.vae_channels_last:
        to_channels_last(vae)
    if options.compiled and compile_blocks(transformer) == 0:
        raise ConfigError(
            f"compile = {options.compile!r}: this {label} transformer has no repeated blocks to compile",
            hint='set compile = "off"',
        )
