"""Two CPU policy workers (gloo process group) reproduce the one-worker run: same images, same update."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file


def test_two_workers_give_the_same_images_and_update_as_one(tmp_path: Path, small_jpeg_run) -> None:
    one = small_jpeg_run(tmp_path / "one", 1)
    two = small_jpeg_run(tmp_path / "two", 2)
    for a, b in zip(one, two, strict=True):
        assert a["reward/mean"] == b["reward/mean"] and a["reward/std"] == b["reward/std"]
        assert abs(a["actor/grad_norm"] - b["actor/grad_norm"]) <= 1e-5 * abs(a["actor/grad_norm"])
    for step in (1, 2):
        reference = load_file(
            str(tmp_path / "one" / "checkpoints" / f"step_{step}" / "worker_0" / "trainable.safetensors")
        )
        for rank in (0, 1):
            path = tmp_path / "two" / "checkpoints" / f"step_{step}" / f"worker_{rank}" / "trainable.safetensors"
            got = load_file(str(path))
            assert got.keys() == reference.keys()
            for name, expected in reference.items():
                error = torch.linalg.vector_norm(got[name] - expected) / max(torch.linalg.vector_norm(expected), 1e-12)
                assert error < 1e-5, (step, rank, name, float(error))
