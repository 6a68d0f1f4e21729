"""FSDP2 with ``mixed_precision = "bf16"`` on the tiny SD3 transformer (a process group of one): the blocks compute
in bfloat16, but the timestep reaches the time embedding in float32, exactly sigma x 1000 (FSDP's default input
cast would round 999 to 1000), and the output stays close to the float32 transformer's.

Runs on the GPU (nccl) where there is one, the setting users run; on the CPU (gloo) always, since the policies
are the same code (the worker refuses bf16 on CPU only because it would be slow)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=pytest.mark.skipif(
            not torch.cuda.is_available(), reason="needs a CUDA GPU (FSDP2 bf16 with nccl); this machine has none"
        ),
    ),
]


@pytest.fixture
def process_group(request: pytest.FixtureRequest) -> Iterator[str]:
    """A torch.distributed group of one in this process (gloo on CPU, nccl on GPU), destroyed afterwards."""
    import torch.distributed as dist

    device = request.param
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    backend = "nccl" if device == "cuda" else "gloo"
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        yield device
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("process_group", DEVICES, indirect=True)
def test_bf16_blocks_with_a_float32_timestep(process_group: str, tiny_sd3: Path) -> None:
    from diffusers import SD3Transformer2DModel

    from omni_rl.engine.fsdp import shard_transformer

    device = process_group
    reference = SD3Transformer2DModel.from_pretrained(tiny_sd3 / "transformer").float().to(device)
    sharded = SD3Transformer2DModel.from_pretrained(tiny_sd3 / "transformer").float().to(device)

    class Model:
        transformer = sharded

    seen: dict[str, torch.dtype | torch.Tensor] = {}
    sharded.time_text_embed.register_forward_pre_hook(lambda module, args: seen.update(timestep=args[0].clone()))
    first_linear = next(m for m in sharded.transformer_blocks[0].modules() if isinstance(m, torch.nn.Linear))
    first_linear.register_forward_pre_hook(lambda module, args: seen.update(block_input=args[0].dtype))
    shard_transformer(Model, device=device, world_size=1, mixed_precision="bf16")

    config = reference.config
    generator = torch.Generator().manual_seed(0)
    inputs = {
        "hidden_states": torch.randn(2, config.in_channels, 8, 8, generator=generator),
        "encoder_hidden_states": torch.randn(2, 5, config.joint_attention_dim, generator=generator),
        "pooled_projections": torch.randn(2, config.pooled_projection_dim, generator=generator),
        "timestep": torch.tensor([999.0, 997.0]),  # bfloat16 would make these 1000 and 996
    }
    inputs = {key: value.to(device) for key, value in inputs.items()}
    with torch.no_grad():
        got = sharded(**inputs, return_dict=False)[0]
        want = reference(**inputs, return_dict=False)[0]
    assert seen["block_input"] == torch.bfloat16  # the blocks do compute in bfloat16
    timestep = seen["timestep"]
    assert isinstance(timestep, torch.Tensor) and timestep.dtype == torch.float32
    assert timestep.tolist() == [999.0, 997.0]
    assert got.dtype == torch.float32
    error = float(torch.linalg.vector_norm(got - want) / torch.linalg.vector_norm(want))
    assert 0 < error < 1e-2, error  # bfloat16 blocks: close to float32, not equal
