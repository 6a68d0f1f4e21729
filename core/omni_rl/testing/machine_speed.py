"""How fast this machine trains, measured in seconds of a short fixed workload, to scale wall-clock bounds.

A time bound measured on one machine (the Quickstart's ten minutes) fails on a slower one for no fault of the code:
2-core cloud VMs of one kind differ by 40% and laptops more. A test that asserts a time first runs
:func:`probe_seconds` and scales its bound by ``probe / reference`` (:func:`slowdown`), where the reference is the
probe's time on the machine the bound was measured on.

The workload is what a Quickstart step spends its time in, in miniature: a few pre-norm transformer blocks (joint
attention and an MLP, float32) on a batch of short token sequences, forward and backward, on ``threads`` torch
threads. Deterministic shapes and inputs, a warm-up call first, and the best of ``repeats`` timings, so a busy
moment on a shared machine reads as little as possible.
"""

from __future__ import annotations

import time

import torch
from torch import nn

#: the workload's shapes: batch of sequences x tokens x width, blocks, heads, MLP ratio (about 0.5 s on 2 threads
#: of the developer machine)
BATCH, TOKENS, WIDTH, BLOCKS, HEADS, MLP_RATIO = 32, 64, 128, 4, 4, 4
#: forward + backward passes per timing
PASSES = 3


class _Block(nn.Module):
    """A pre-norm transformer block: self-attention through ``scaled_dot_product_attention`` and a GELU MLP."""

    def __init__(self) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
        self.qkv, self.out = nn.Linear(WIDTH, 3 * WIDTH), nn.Linear(WIDTH, WIDTH)
        self.mlp = nn.Sequential(nn.Linear(WIDTH, MLP_RATIO * WIDTH), nn.GELU(), nn.Linear(MLP_RATIO * WIDTH, WIDTH))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, _ = x.shape
        qkv = self.qkv(self.norm1(x)).view(batch, tokens, 3, HEADS, WIDTH // HEADS).permute(2, 0, 3, 1, 4)
        attended = nn.functional.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])
        x = x + self.out(attended.transpose(1, 2).reshape(batch, tokens, WIDTH))
        return x + self.mlp(self.norm2(x))


def probe_seconds(threads: int = 2, repeats: int = 3) -> float:
    """Seconds of :data:`PASSES` forward and backward passes of the probe network on ``threads`` torch threads: the
    best of ``repeats`` timings after one warm-up pass. The caller's torch thread count is restored."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        generator = torch.Generator().manual_seed(0)
        network = nn.Sequential(*[_Block() for _ in range(BLOCKS)])
        with torch.no_grad():
            for parameter in network.parameters():
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.02)
        inputs = torch.randn(BATCH, TOKENS, WIDTH, generator=generator)

        def one_pass() -> None:
            network.zero_grad(set_to_none=True)
            network(inputs).square().mean().backward()

        one_pass()  # warm-up: allocator and kernel selection
        timings = []
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(PASSES):
                one_pass()
            timings.append(time.perf_counter() - start)
        return min(timings)
    finally:
        torch.set_num_threads(previous)


def slowdown(measured_s: float, reference_s: float) -> float:
    """How many times slower this machine is than the reference one (at least 1: a faster machine keeps the
    bound as measured, it is not tightened)."""
    return max(1.0, measured_s / reference_s)
