"""Find and load a QwenImagePipeline by path (or hub id), turning every way that fails into a ConfigError naming
the option: :class:`omni_rl_sd3.loading.PipelineKind` (the checks every diffusers model adapter shares) for
Qwen-Image."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from omni_rl_sd3.loading import PipelineKind

from omni_rl_qwen_image.config import QwenImageConfig

if TYPE_CHECKING:
    from diffusers import QwenImagePipeline

QWEN_IMAGE = PipelineKind(
    label="Qwen-Image",
    pipeline_class="QwenImagePipeline",
    class_names=frozenset({"QwenImagePipeline", "QwenImageImg2ImgPipeline", "QwenImageInpaintPipeline"}),
    required=("transformer", "vae", "scheduler", "text_encoder", "tokenizer"),
    model_name="qwen_image",
    example="Qwen/Qwen-Image",
)


def resolve_pipeline_path(config: QwenImageConfig) -> str:
    """The local directory (checked) or hub id to load; builds the tiny pipeline first when asked to."""

    def build_tiny(path: Path) -> None:
        from omni_rl_qwen_image.tiny import build_tiny_qwen_image_pipeline

        build_tiny_qwen_image_pipeline(path, exist_ok=True)

    return QWEN_IMAGE.resolve(config, build_tiny)


def load_pipeline(config: QwenImageConfig, source: str) -> QwenImagePipeline:
    """Load the pipeline from ``source`` (resolved by :func:`resolve_pipeline_path`) in ``config.dtype`` on CPU."""
    return QWEN_IMAGE.load(config, source)
