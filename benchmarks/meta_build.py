"""Random-weight models of any size, built in seconds: modules created on the meta device, weights made on the target.

Building a 20 B-parameter transformer the ordinary way allocates and initialises 40 GB on the CPU (minutes of
single-threaded ``kaiming_uniform_``) before copying it to the GPU. Here the module is created under accelerate's
``init_empty_weights`` (parameters on the ``meta`` device: shapes only, no memory; buffers such as RoPE tables
stay real and small), then every parameter is allocated directly on the target device and filled there (normal
with std 0.02 for matrices, ones for norm scales, zeros for biases), so a GPU does the work in a fraction of a
second. The weights are random: benchmarks measure time and memory, which do not depend on their values.
"""

from __future__ import annotations

from typing import Any

import torch


def _fill_(name: str, tensor: torch.Tensor, generator: torch.Generator) -> None:
    """A plausible random init that keeps activations finite through many layers."""
    leaf = name.rsplit(".", 1)[-1]
    if tensor.ndim >= 2:
        tensor.normal_(0.0, 0.02, generator=generator)
    elif leaf == "bias":
        tensor.zero_()
    else:  # norm scales, per-channel gains
        tensor.fill_(1.0)


def materialise(module: torch.nn.Module, device: str | torch.device, dtype: torch.dtype, seed: int = 0) -> None:
    """Give every meta parameter of ``module`` storage on ``device`` in ``dtype`` and fill it there; real buffers
    move to ``device`` too. With ``device = "meta"`` nothing is allocated (shapes only)."""
    device = torch.device(device)
    generator = None if device.type == "meta" else torch.Generator(device=device).manual_seed(seed)
    with torch.no_grad():
        for module_name, sub in module.named_modules():
            for name, param in list(sub._parameters.items()):
                if param is None:
                    continue
                data = torch.empty(param.shape, device=device, dtype=dtype if param.is_floating_point() else None)
                if generator is not None:
                    _fill_(f"{module_name}.{name}", data, generator)
                sub._parameters[name] = torch.nn.Parameter(data, requires_grad=param.requires_grad)
        if device.type != "meta":
            module.to(device)


def build_on_device(
    factory: Any, device: str | torch.device, dtype: torch.dtype = torch.bfloat16, seed: int = 0
) -> torch.nn.Module:
    """``factory()`` (a model constructor taking no arguments) built on the meta device, then materialised on
    ``device`` (:func:`materialise`); eval mode, gradients off (benchmarks add LoRA)."""
    from accelerate import init_empty_weights

    with init_empty_weights(include_buffers=False):
        module = factory()
    materialise(module, device, dtype, seed)
    return module.eval().requires_grad_(False)


def parameter_count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())
