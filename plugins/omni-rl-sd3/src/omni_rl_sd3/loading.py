"""Find and load a StableDiffusion3Pipeline by path (or hub id), turning every way that fails into a ConfigError
naming the option: :class:`omni_rl_pipelines.loading.PipelineKind` (the checks every diffusers model adapter
shares) for SD3, whose tiny pipeline and loading also follow ``use_t5``. (The kit is imported as a module, so the
names that moved out of this one are only reached through the warning of ``__getattr__``.)
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from omni_rl_pipelines import loading as kit

from omni_rl_sd3._moved import moved_name
from omni_rl_sd3.config import SD3Config

if TYPE_CHECKING:
    from diffusers import StableDiffusion3Pipeline

SD3 = kit.PipelineKind(
    label="SD3",
    pipeline_class="StableDiffusion3Pipeline",
    class_names=frozenset(
        {"StableDiffusion3Pipeline", "StableDiffusion3Img2ImgPipeline", "StableDiffusion3InpaintPipeline"}
    ),
    required=("transformer", "vae", "scheduler", "text_encoder", "text_encoder_2", "tokenizer", "tokenizer_2"),
    model_name="sd3",
    example="stabilityai/stable-diffusion-3.5-medium",
    gated=True,
    tiny_builder="omni_rl_sd3.tiny:build_tiny_sd3_pipeline",
)


def __getattr__(name: str) -> Any:
    # PipelineKind lived here until omni-rl-sd3 0.1.0; read with a warning until 0.2
    return moved_name(__name__, name, {"PipelineKind": "omni_rl_pipelines.loading"})


def resolve_pipeline_path(config: SD3Config) -> str:
    """The local directory (checked) or hub id to load; builds the tiny pipeline first when asked to (without T5
    when ``use_t5`` is false)."""

    def build_tiny(path: Path) -> None:
        from omni_rl_sd3.tiny import build_tiny_sd3_pipeline

        build_tiny_sd3_pipeline(path, use_t5=config.use_t5, exist_ok=True)

    return SD3.resolve(config, build_tiny)


def check_pipeline_dir(directory: Path) -> None:
    """Raise ConfigError unless ``directory`` looks like a saved StableDiffusion3Pipeline."""
    SD3.check_dir(directory)


def load_pipeline(config: SD3Config, source: str) -> StableDiffusion3Pipeline:
    """Load the pipeline from ``source`` (resolved by :func:`resolve_pipeline_path`) in ``config.dtype`` on CPU;
    T5 is not even read from disk when ``use_t5`` is false."""
    skip_t5 = {} if config.use_t5 else {"text_encoder_3": None, "tokenizer_3": None}
    return SD3.load(config, source, **skip_t5)
