"""benchmarks/real_sizes.py on the CPU: the meta-device builder (fast, on the requested device, shapes from the
config, nothing materialised where it should not be), the published sizes counted without allocating them, one
training step of each architecture's inputs on a shrunken model, and the clean refusal without CUDA."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

import real_sizes
from meta_build import build_on_device, parameter_count
from real_size_specs import COUNTED_SIZES, SIZES, transformer_factory

#: shrunken versions of each architecture: same code path, a few layers of small width
TINY = {
    "sd35l": dict(
        num_layers=2,
        num_attention_heads=2,
        attention_head_dim=16,
        caption_projection_dim=32,
        joint_attention_dim=32,
        pooled_projection_dim=32,
        sample_size=16,
        pos_embed_max_size=16,
    ),
    "flux": dict(
        num_layers=1,
        num_single_layers=1,
        num_attention_heads=2,
        attention_head_dim=16,
        joint_attention_dim=32,
        pooled_projection_dim=32,
        axes_dims_rope=(4, 6, 6),
    ),
    "qwen": dict(
        num_layers=1, num_attention_heads=2, attention_head_dim=16, joint_attention_dim=32, axes_dims_rope=(4, 6, 6)
    ),
}


def test_tiny_build_is_fast_on_the_requested_device_with_the_configs_shapes() -> None:
    factory = transformer_factory(SIZES["sd35l"], **TINY["sd35l"])  # imports diffusers: not part of the build
    start = time.perf_counter()
    model = build_on_device(factory, "cpu", torch.float32)
    assert time.perf_counter() - start < 1.0
    assert {p.device.type for p in model.parameters()} == {"cpu"}
    assert len(model.transformer_blocks) == 2
    width = 2 * 16
    assert model.transformer_blocks[0].attn.to_q.weight.shape == (width, width)
    assert model.context_embedder.weight.shape == (32, 32)  # caption projection x joint attention dim
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert model.transformer_blocks[0].attn.to_q.weight.std() == pytest.approx(0.02, rel=0.2)


def test_meta_target_materialises_nothing() -> None:
    model = build_on_device(transformer_factory(SIZES["sd35l"], **TINY["sd35l"]), "meta")
    assert {p.device.type for p in model.parameters()} == {"meta"}


@pytest.mark.parametrize("key", ["flux", "qwen"])
def test_published_sizes_without_allocating_them(key: str) -> None:
    """The full FLUX.1-dev (11.9 B) and Qwen-Image (20.4 B) transformers on the meta device: seconds, no memory."""
    size = SIZES[key]
    factory = transformer_factory(size)
    start = time.perf_counter()
    model = build_on_device(factory, "meta")
    assert time.perf_counter() - start < 10.0
    assert parameter_count(model) / 1e9 == pytest.approx(size.published_b, abs=0.01)
    assert {p.device.type for p in model.parameters()} == {"meta"}


@pytest.mark.parametrize("key", sorted(COUNTED_SIZES))
def test_newer_published_sizes_counted_on_the_meta_device(key: str) -> None:
    """FLUX.2-klein 4B / 9B, FLUX.2-dev (32 B), Z-Image (6 B) and Qwen-Image 2.1: the published transformer
    dimensions built on the meta device, their parameter count the published size (the nominal 4 / 9 / 32 / 6 B)."""
    size = COUNTED_SIZES[key]
    model = build_on_device(transformer_factory(size), "meta")
    assert {p.device.type for p in model.parameters()} == {"meta"}
    assert parameter_count(model) / 1e9 == pytest.approx(size.published_b, abs=0.01)
    assert key not in SIZES  # measured by real_sizes.py once it builds their inputs


@pytest.mark.parametrize("key", sorted(SIZES))
def test_one_training_step_runs_on_each_architectures_inputs(key: str) -> None:
    size = SIZES[key]
    size = type(size)(**{**size.__dict__, "height": 64, "steps": 2, "lora_rank": 2, "lora_alpha": 2, "group_size": 1})
    model = build_on_device(transformer_factory(size, **TINY[key]), "cpu", torch.float32)
    params = real_sizes.prepare(model, size)
    before = [p.detach().clone() for p in params]
    real_sizes.train_step(size, model, torch.optim.SGD(params, lr=1.0), 2, 2, 1, torch.device("cpu"))
    assert any(not torch.equal(a, p) for a, p in zip(before, params, strict=True))


def test_refuses_cleanly_without_cuda(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is visible")
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n")
    assert real_sizes.main(["--out", str(doc)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith("bench_real_sizes skipped: no CUDA device")
    assert doc.read_text() == "# Benchmarks\n"
