"""A video model's frame count, checked without loading it (by ``omni-rl check``, and by ``run`` before it creates
the run directory).

A video model (``ModelSpec.modality = "video"``) samples ``1 + k x f`` frames, f being how many frames its pipeline's
VAE folds into one latent frame after the first (Wan: 4, so 1, 5, 9, ... 81; the shapes-motion pipeline: 1). The
VAE declares f in ``vae/config.json``, under diffusers' ``scale_factor_temporal`` (Wan) or
``temporal_compression_ratio`` (its other video VAEs), so a local pipeline directory answers without a weight being
read; a hub id, or a tiny pipeline not built yet (``build_tiny_if_missing``), is left to the model, which checks
again when it samples. Found at step 1 instead, the error stopped a run that had already started Ray and loaded the
model (qa-2026-12 N11).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from omni_rl.config.schema import ResolvedComponent, ResolvedConfig
from omni_rl.errors import ConfigError
from omni_rl.package_paths import is_package_path, package_path

#: the keys under which diffusers' video VAEs declare their time compression
TEMPORAL_KEYS = ("scale_factor_temporal", "temporal_compression_ratio")


def frame_count_problems(config: ResolvedConfig) -> list[str]:
    """The rollout's ``options.num_frames`` against the video pipeline's VAE; one line ending in its ``@ $.path``."""
    model, rollout = config.components["model"], config.components.get("rollout")
    frames = getattr(rollout.options, "num_frames", None) if rollout is not None else None
    if getattr(model.spec, "modality", "image") != "video" or not isinstance(frames, int) or isinstance(frames, bool):
        return []
    directory = local_pipeline(model)
    factor = temporal_factor(directory / "vae" / "config.json") if directory is not None else None
    if factor is None or factor < 2 or (frames - 1) % factor == 0:
        return []
    below = 1 + (frames - 1) // factor * factor
    return [
        f"num_frames = {frames} is not supported by the {model.name!r} pipeline at {model.options.path!r}: its VAE "
        f"compresses time {factor}x after the first frame, so num_frames must be {factor}k + 1; use {below} or "
        f"{below + factor} @ $.rollout.options.num_frames"
    ]


def check_frame_counts(config: ResolvedConfig, source: str) -> None:
    """``omni-rl run``'s share of the preflight: a ConfigError (exit 2) naming the problem, before the run directory
    is created. Harmless on a cluster: a path that is not a local directory is not checked."""
    problems = frame_count_problems(config)
    if problems:
        raise ConfigError(
            f"{source} is valid, but the run would stop in its first step: {problems[0]}",
            hint="`omni-rl check` finds this too, without loading the model or starting Ray",
        )


def local_pipeline(model: ResolvedComponent) -> Path | None:
    """The model's ``options.path`` as a local directory, or None (unset, a hub id, not there yet)."""
    path = getattr(model.options, "path", None)
    if not isinstance(path, str) or not path:
        return None
    try:
        directory = package_path(path, "model") if is_package_path(path) else Path(path).expanduser()
    except ConfigError:
        return None  # the preflight's model path check reports it
    return directory if directory.is_dir() else None


def temporal_factor(vae_config: Path) -> int | None:
    """The time compression a VAE's ``config.json`` declares, or None (no such file or key)."""
    try:
        loaded: Any = json.loads(vae_config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(loaded, dict):
        return None
    for key in TEMPORAL_KEYS:
        value = loaded.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None
