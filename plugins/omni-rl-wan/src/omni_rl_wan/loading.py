"""Find and load a WanPipeline by path (or hub id), turning every way that fails into a ConfigError naming the
option: :class:`omni_rl_sd3.loading.PipelineKind` (the checks every diffusers model adapter shares) for Wan."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from omni_rl_sd3.loading import PipelineKind

from omni_rl_wan.config import WanConfig

if TYPE_CHECKING:
    from diffusers import WanPipeline

WAN = PipelineKind(
    label="Wan",
    pipeline_class="WanPipeline",
    # WanPipeline alone: the image-to-video and VACE pipelines condition on images this adapter does not feed
    class_names=frozenset({"WanPipeline"}),
    required=("transformer", "vae", "scheduler", "text_encoder", "tokenizer"),
    model_name="wan",
    example="Wan-AI/Wan2.1-T2V-1.3B-Diffusers",
)


def resolve_pipeline_path(config: WanConfig) -> str:
    """The local directory (checked) or hub id to load; builds the tiny pipeline first when asked to."""

    def build_tiny(path: Path) -> None:
        from omni_rl_wan.tiny import build_tiny_wan_pipeline

        build_tiny_wan_pipeline(path, exist_ok=True)

    return WAN.resolve(config, build_tiny)


def load_pipeline(config: WanConfig, source: str) -> WanPipeline:
    """Load the pipeline from ``source`` (resolved by :func:`resolve_pipeline_path`) in ``config.dtype`` on CPU."""
    return WAN.load(config, source)
