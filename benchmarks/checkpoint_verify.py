"""What verifying a checkpoint costs (docs/benchmarks.md, "Checkpoint verification"): loading a safetensors file
with the manifest check (read once, SHA-256 over each chunk as it arrives, tensors as views of the bytes) against
safetensors' own ``load_file`` (mmap, no check), each followed by copying the tensors out as loading into a model
does, and writing the manifest (hash + fsync of every file) against the fsync alone.

Files: the full weights of the mid-size transformer of benchmarks/overhead.py (8 layers, width 256) and a 1 GiB
tensor file (the scale of a large LoRA's optimizer state). Medians of ``--repeats`` runs with a warm page cache,
so the numbers are the CPU cost of the check, not the disk's speed.

    python benchmarks/checkpoint_verify.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from omni_rl.rundir.manifest import CheckpointReader, hash_file, write_manifest


def mid_transformer_state(cache: Path) -> dict[str, torch.Tensor]:
    """The mid-size transformer's parameters (random init), from the pipeline benchmarks/overhead.py builds."""
    from overhead import build_pipeline

    return load_file(str(build_pipeline("mid", cache) / "transformer" / "diffusion_pytorch_model.safetensors"))


def median_s(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm the page cache
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _copied(tensors: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    return [t.clone() for t in tensors.values()]


def fsync_only(directory: Path) -> None:
    for path in directory.rglob("*"):
        if path.is_file():
            with path.open("rb") as handle:
                os.fsync(handle.fileno())


def measure(label: str, tensors: dict[str, torch.Tensor], repeats: int) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        save_file(tensors, str(directory / "weights.safetensors"))
        size = (directory / "weights.safetensors").stat().st_size
        write_manifest(directory)
        reader = CheckpointReader(directory)
        # both copied into fresh tensors, as loading into a model does (an mmap alone reads nothing)
        plain = median_s(lambda: _copied(load_file(str(directory / "weights.safetensors"))), repeats)
        checked = median_s(lambda: _copied(reader.load_tensors("weights.safetensors")), repeats)
        hashed = median_s(lambda: hash_file(directory / "weights.safetensors"), repeats)
        sync = median_s(lambda: fsync_only(directory), repeats)
        manifest = median_s(lambda: write_manifest(directory), repeats)
    mib = size / 2**20
    return (
        f"| {label} | {mib:.0f} MiB | {plain * 1e3:.0f} ms | {checked * 1e3:.0f} ms | "
        f"{(checked - plain) * 1e3:+.0f} ms | {mib / hashed:.0f} MiB/s | {sync * 1e3:.0f} ms | "
        f"{manifest * 1e3:.0f} ms |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(
        "| file | size | load_file + copy (no check) | verified load + copy | cost | SHA-256 | fsync only | "
        "manifest (hash + fsync) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as cache:
        print(measure("mid transformer, full weights", mid_transformer_state(Path(cache)), args.repeats))
    print(measure("1 GiB tensor file", {"x": torch.randn(2**28)}, args.repeats))


if __name__ == "__main__":
    main()
