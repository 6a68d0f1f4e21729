"""Write tiny random FluxKontextPipeline directories for tests, examples and CPU benchmarks.

FLUX.1-Kontext-dev has FLUX.1-dev's components exactly (``FluxTransformer2DModel`` with guidance embeddings, the
16-channel ``AutoencoderKL`` with FLUX's scaling and shift, CLIP-L + T5, the dynamically shifted
``FlowMatchEulerDiscreteScheduler``); what makes it an editing model is its training and the pipeline class that
appends the source image's tokens. So the tiny Kontext pipeline is :func:`omni_rl_flux.tiny.build_tiny_flux_pipeline`'s
dev-like set, saved as a ``FluxKontextPipeline`` (``image_encoder`` / ``feature_extractor``, the optional IP-Adapter
parts, left out) with ``save_pretrained``; ``FluxKontextPipeline.from_pretrained(path)`` runs it offline.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import attrs
from omni_rl_pipelines.tiny import write_tiny_pipeline

from omni_rl_flux.tiny import TinyFluxShape, _add_portable_tokenizer_files, _random_pipeline

__all__ = ["build_tiny_kontext_pipeline"]


def build_tiny_kontext_pipeline(
    path: str | os.PathLike[str],
    *,
    seed: int = 0,
    shape: TinyFluxShape | None = None,
    overwrite: bool = False,
    exist_ok: bool = False,
) -> Path:
    """Write a random FluxKontextPipeline to ``path`` and return it (``shape``'s variant is always "dev": Kontext is
    guidance-distilled). ``overwrite`` / ``exist_ok`` and the atomic write are as for the FLUX builder."""
    shape = attrs.evolve(shape or TinyFluxShape(), variant="dev")
    shape.check()

    def write(out: Path, scratch: Path) -> None:
        _kontext_pipeline(shape, seed=seed, tokenizer_dir=scratch / "tokenizers").save_pretrained(
            out, safe_serialization=True
        )
        _add_portable_tokenizer_files(out)

    marker = {"builder": "omni_rl_flux.kontext_tiny.build_tiny_kontext_pipeline", "seed": seed, "random_weights": True}
    return write_tiny_pipeline(
        path, write, label="FLUX.1-Kontext", marker=marker, overwrite=overwrite, exist_ok=exist_ok
    )


def _kontext_pipeline(shape: TinyFluxShape, *, seed: int, tokenizer_dir: Path) -> Any:
    from diffusers import FluxKontextPipeline

    components = dict(_random_pipeline(shape, seed=seed, tokenizer_dir=tokenizer_dir).components)
    components.update(image_encoder=None, feature_extractor=None)
    return FluxKontextPipeline(**components)
