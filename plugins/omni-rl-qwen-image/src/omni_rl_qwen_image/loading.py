"""Find and load a QwenImagePipeline by path (or hub id), turning every way that fails into a ConfigError.

A wrong ``path`` is the most common first-run mistake, and diffusers' own errors for it (a missing
``model_index.json``, a hub lookup of a local-looking string, a missing subfolder) do not say what to change in
config.toml. This module checks the directory first and says exactly that.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omni_rl.errors import ConfigError
from omni_rl.package_paths import is_package_path, package_path
from omni_rl_qwen_image.config import QwenImageConfig

if TYPE_CHECKING:
    from diffusers import QwenImagePipeline

#: Pipelines whose directories hold exactly the text-to-image Qwen-Image components.
QWEN_IMAGE_PIPELINE_CLASSES = frozenset({"QwenImagePipeline", "QwenImageImg2ImgPipeline", "QwenImageInpaintPipeline"})
REQUIRED_COMPONENTS = ("transformer", "vae", "scheduler", "text_encoder", "tokenizer")
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")

_PATH_HINT = (
    "set [model] options.path to a diffusers QwenImagePipeline directory (the folder holding model_index.json, "
    "e.g. a local copy of Qwen/Qwen-Image), or set build_tiny_if_missing = true to write a tiny random pipeline "
    "there for a smoke test"
)


def resolve_pipeline_path(config: QwenImageConfig) -> str:
    """The local directory (checked) or hub id to load; builds the tiny pipeline first when asked to.

    ``package:<module>:<relative path>`` names a pipeline shipped as package data by an installed plugin."""
    if is_package_path(config.path):
        directory = package_path(config.path, "Qwen-Image pipeline")
        check_pipeline_dir(directory)
        return str(directory)
    local = Path(config.path).expanduser()
    if not local.exists():
        if config.build_tiny_if_missing:
            from omni_rl_qwen_image.tiny import build_tiny_qwen_image_pipeline

            build_tiny_qwen_image_pipeline(local, exist_ok=True)  # other workers may race us
            return str(local)
        if _HUB_ID.match(config.path):
            return config.path  # a hub id; from_pretrained resolves (or refuses) it
        raise ConfigError(f"Qwen-Image pipeline path {config.path!r} does not exist", hint=_PATH_HINT)
    check_pipeline_dir(local)
    return str(local)


def check_pipeline_dir(directory: Path) -> None:
    """Raise ConfigError unless ``directory`` looks like a saved QwenImagePipeline."""
    index_path = directory / "model_index.json"
    if not index_path.is_file():
        raise ConfigError(f"{directory} is not a diffusers pipeline directory (no model_index.json)", hint=_PATH_HINT)
    try:
        index = json.loads(index_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ConfigError(f"cannot read {index_path}: {error}", hint=_PATH_HINT) from error
    class_name = index.get("_class_name")
    if class_name not in QWEN_IMAGE_PIPELINE_CLASSES:
        raise ConfigError(
            f"{directory} holds a {class_name}, not a QwenImagePipeline",
            hint="the qwen_image model loads Qwen-Image text-to-image pipelines; pick the model plugin for this one",
        )
    missing = [name for name in REQUIRED_COMPONENTS if not _present(index.get(name))]
    if missing:
        raise ConfigError(
            f"{directory} lacks the Qwen-Image components {', '.join(missing)}",
            hint="re-download the full pipeline (all subfolders), not only the transformer weights",
        )


def _present(entry: object) -> bool:
    return isinstance(entry, list) and len(entry) == 2 and entry[0] is not None


def dtype_kwargs(dtype: Any) -> dict[str, Any]:
    """``from_pretrained``'s dtype keyword: newer diffusers renamed ``torch_dtype`` to ``dtype``."""
    try:
        from diffusers.utils.deprecation_utils import _resolve_dtype  # noqa: F401
    except ImportError:
        return {"torch_dtype": dtype}
    return {"dtype": dtype}


def load_pipeline(config: QwenImageConfig, source: str) -> QwenImagePipeline:
    """Load the pipeline from ``source`` (resolved by :func:`resolve_pipeline_path`) in ``config.dtype`` on CPU."""
    import torch
    from diffusers import QwenImagePipeline
    from diffusers.utils import logging as diffusers_logging

    # Per-component loading bars from every worker would drown the trainer's own progress bar.
    diffusers_logging.disable_progress_bar()
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[config.dtype]
    try:
        return QwenImagePipeline.from_pretrained(source, **dtype_kwargs(dtype))
    except (OSError, ValueError, KeyError) as error:
        hint = _PATH_HINT
        if source == config.path and not Path(source).exists():
            hint = (
                f"{source!r} is not a local directory, so it was read as a hub id, which could not be fetched "
                f"(offline or misspelt); download it (`hf download {source} --local-dir DIR`) and set path = DIR"
            )
        raise ConfigError(f"could not load a QwenImagePipeline from {source!r}: {error}", hint=hint) from error
