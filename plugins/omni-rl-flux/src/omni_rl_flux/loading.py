"""Find and load a FluxPipeline by path (or hub id), turning every way that fails into a ConfigError.

A wrong ``path`` is the most common first-run mistake, and diffusers' own errors for it (a missing
``model_index.json``, a hub lookup of a local-looking string, a missing subfolder) do not say what to change in
config.toml. This module checks the directory first and says exactly that.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

from omni_rl.errors import ConfigError
from omni_rl.package_paths import is_package_path, package_path
from omni_rl_flux.config import FluxConfig

if TYPE_CHECKING:
    from diffusers import FluxPipeline

#: Pipelines whose directories hold exactly the text-to-image FLUX.1 components.
FLUX_PIPELINE_CLASSES = frozenset({"FluxPipeline", "FluxImg2ImgPipeline", "FluxInpaintPipeline"})
REQUIRED_COMPONENTS = ("transformer", "vae", "scheduler", "text_encoder", "text_encoder_2", "tokenizer", "tokenizer_2")
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")

_PATH_HINT = (
    "set [model] options.path to a diffusers FluxPipeline directory (the folder holding model_index.json, e.g. a "
    "local copy of black-forest-labs/FLUX.1-dev), or set build_tiny_if_missing = true to write a tiny random "
    "pipeline there for a smoke test"
)


def resolve_pipeline_path(config: FluxConfig) -> str:
    """The local directory (checked) or hub id to load; builds the tiny pipeline first when asked to.

    ``package:<module>:<relative path>`` names a pipeline shipped as package data by an installed plugin."""
    if is_package_path(config.path):
        directory = package_path(config.path, "FLUX pipeline")
        check_pipeline_dir(directory)
        return str(directory)
    local = Path(config.path).expanduser()
    if not local.exists():
        if config.build_tiny_if_missing:
            from omni_rl_flux.tiny import build_tiny_flux_pipeline

            build_tiny_flux_pipeline(local, exist_ok=True)  # other workers may race us
            return str(local)
        if _HUB_ID.match(config.path):
            return config.path  # a hub id; from_pretrained resolves (or refuses) it
        raise ConfigError(f"FLUX pipeline path {config.path!r} does not exist", hint=_PATH_HINT)
    check_pipeline_dir(local)
    return str(local)


def check_pipeline_dir(directory: Path) -> None:
    """Raise ConfigError unless ``directory`` looks like a saved FluxPipeline."""
    index_path = directory / "model_index.json"
    if not index_path.is_file():
        raise ConfigError(f"{directory} is not a diffusers pipeline directory (no model_index.json)", hint=_PATH_HINT)
    try:
        index = json.loads(index_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ConfigError(f"cannot read {index_path}: {error}", hint=_PATH_HINT) from error
    class_name = index.get("_class_name")
    if class_name not in FLUX_PIPELINE_CLASSES:
        raise ConfigError(
            f"{directory} holds a {class_name}, not a FluxPipeline",
            hint="the flux model loads FLUX.1 text-to-image pipelines; pick the model plugin for this architecture",
        )
    missing = [name for name in REQUIRED_COMPONENTS if not _present(index.get(name))]
    if missing:
        raise ConfigError(
            f"{directory} lacks the FLUX components {', '.join(missing)}",
            hint="re-download the full pipeline (all subfolders), not only the transformer weights",
        )


def _present(entry: object) -> bool:
    return isinstance(entry, list) and len(entry) == 2 and entry[0] is not None


def load_pipeline(config: FluxConfig, source: str) -> FluxPipeline:
    """Load the pipeline from ``source`` (resolved by :func:`resolve_pipeline_path`) in ``config.dtype`` on CPU."""
    import torch
    from diffusers import FluxPipeline
    from diffusers.utils import logging as diffusers_logging
    from omni_rl_sd3.compat import dtype_kwargs

    # Per-component loading bars from every worker would drown the trainer's own progress bar.
    diffusers_logging.disable_progress_bar()
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[config.dtype]
    try:
        return FluxPipeline.from_pretrained(source, **dtype_kwargs(dtype))
    except (OSError, ValueError, KeyError) as error:
        hint = _PATH_HINT
        if source == config.path and not Path(source).exists():
            hint = (
                f"{source!r} is not a local directory, so it was read as a hub id, which could not be fetched "
                f"(offline, gated or misspelt); download it (`hf download {source} --local-dir DIR`, after accepting "
                "the license on the hub for gated FLUX repositories) and set path = DIR"
            )
        raise ConfigError(f"could not load a FluxPipeline from {source!r}: {error}", hint=hint) from error
