"""Shared fixtures of the omni-rl-dpo tests: one tiny random SD3 pipeline per session, built offline."""

from __future__ import annotations

import os

# Before diffusers/transformers are imported anywhere: never reach for a hub, and keep the output readable.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("DIFFUSERS_VERBOSITY", "error")

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_sd3_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random StableDiffusion3Pipeline directory (2x VAE: 32 px images have 16x16 latents)."""
    from omni_rl_sd3.tiny import build_tiny_sd3_pipeline

    return Path(build_tiny_sd3_pipeline(tmp_path_factory.mktemp("sd3") / "tiny", seed=0))


@pytest.fixture(scope="session")
def sd3_lora_model(tiny_sd3_path: Path):
    """The ``sd3`` model as a run builds it, LoRA rank 4 (read-only users only: tests must not train it)."""
    from omni_rl_sd3.config import SD3Config
    from omni_rl_sd3.model import build_sd3_model

    from omni_rl.context import BuildContext

    return build_sd3_model(SD3Config(path=str(tiny_sd3_path), lora_rank=4), BuildContext(device="cpu"))


def write_preference_set(directory: Path, prompts: list[str], *, size: int = 32) -> Path:
    """A preference .jsonl whose chosen images are plain colours and rejected images seeded noise (PNG files)."""
    import json

    import numpy as np
    from PIL import Image

    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    lines = []
    for k, prompt in enumerate(prompts):
        plain = np.zeros((size, size, 3), dtype=np.uint8)
        plain[...] = (40 * k % 256, 120, 200)
        noise = rng.integers(0, 256, size=(size, size, 3), dtype=np.uint8)
        chosen, rejected = directory / f"chosen_{k}.png", directory / f"rejected_{k}.png"
        Image.fromarray(plain).save(chosen)
        Image.fromarray(noise).save(rejected)
        lines.append(json.dumps({"prompt": prompt, "chosen": str(chosen), "rejected": str(rejected)}))
    path = directory / "preferences.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def preference_set():
    """``write_preference_set`` (a helper, so test modules need not import conftest)."""
    return write_preference_set
