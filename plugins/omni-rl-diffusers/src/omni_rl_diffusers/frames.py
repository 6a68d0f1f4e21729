"""The latent shape a rollout samples: an image's, or a video's with ``num_frames`` (docs/hooks.md, "Video").

A model says it makes videos with ``modality = "video"``; its ``latent_shape(height, width, num_frames=F)`` then
has a frame axis and its ``decode`` returns (B, F, H, W, 3) frames. Everything else in the rollout is rank-agnostic
(per-sample noise of the latent shape, the samplers' steps, the trajectory's (N, W, ...) stacking), so this is the
one place that knows about frames. ``num_frames`` on an image model is refused rather than ignored: a config that
asks for video and silently trains on images would waste the run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omni_rl.errors import ConfigError


def is_video_model(model: Any) -> bool:
    return getattr(model, "modality", "image") == "video"


def rollout_latent_shape(model: Any, height: int, width: int, num_frames: int) -> tuple[int, ...]:
    """``model.latent_shape`` for this rollout's size and, for a video model, frame count."""
    if is_video_model(model):
        return tuple(model.latent_shape(height, width, num_frames=num_frames))
    if num_frames != 1:
        raise ConfigError(
            f"[rollout] options.num_frames = {num_frames}, but the {type(model).__name__} model makes images",
            hint="remove num_frames (or set it to 1), or use a video model such as wan",
        )
    return tuple(model.latent_shape(height, width))


def frames_check(components: Mapping[str, Any]) -> list[str]:
    """``RolloutSpec.check``: ``num_frames`` other than 1 for a model whose spec declares images
    (``ModelSpec.modality``), refused by ``omni-rl check`` and before ``run`` starts Ray and the model, not in step 1
    (qa-2026-12 N11). A video model's frame count (Wan: 4k + 1) depends on its pipeline's VAE, which the core's
    preflight reads (omni_rl.train.preflight), and the model checks again when it samples."""
    rollout, model = components.get("rollout"), components.get("model")
    frames = getattr(rollout.options, "num_frames", None) if rollout is not None else None
    if model is None or not isinstance(frames, int) or isinstance(frames, bool) or frames == 1:
        return []
    if getattr(model.spec, "modality", "image") == "video":
        return []
    return [
        f"invalid value: num_frames = {frames}, but the {model.name!r} model makes images; remove num_frames (or set "
        "it to 1), or use a video model such as wan @ $.rollout.options.num_frames"
    ]
