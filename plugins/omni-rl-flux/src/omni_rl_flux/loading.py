"""Find and load a FluxPipeline by path (or hub id), turning every way that fails into a ConfigError naming the
option: :class:`omni_rl_sd3.loading.PipelineKind` (the checks every diffusers model adapter shares) for FLUX.1."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from omni_rl_sd3.loading import PipelineKind

from omni_rl_flux.config import FluxConfig

if TYPE_CHECKING:
    from diffusers import FluxPipeline

FLUX = PipelineKind(
    label="FLUX",
    pipeline_class="FluxPipeline",
    class_names=frozenset({"FluxPipeline", "FluxImg2ImgPipeline", "FluxInpaintPipeline"}),
    required=("transformer", "vae", "scheduler", "text_encoder", "text_encoder_2", "tokenizer", "tokenizer_2"),
    model_name="flux",
    example="black-forest-labs/FLUX.1-dev",
    gated=True,
)


def resolve_pipeline_path(config: FluxConfig) -> str:
    """The local directory (checked) or hub id to load; builds the tiny pipeline first when asked to."""

    def build_tiny(path: Path) -> None:
        from omni_rl_flux.tiny import build_tiny_flux_pipeline

        build_tiny_flux_pipeline(path, exist_ok=True)

    return FLUX.resolve(config, build_tiny)


def load_pipeline(config: FluxConfig, source: str) -> FluxPipeline:
    """Load the pipeline from ``source`` (resolved by :func:`resolve_pipeline_path`) in ``config.dtype`` on CPU."""
    return FLUX.load(config, source)
