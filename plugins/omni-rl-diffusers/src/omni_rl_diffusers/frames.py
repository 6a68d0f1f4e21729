"""The latent shape a rollout samples: an image's, or a video's with ``num_frames`` (docs/hooks.md, "Video").

A model says it makes videos with ``modality = "video"``; its ``latent_shape(height, width, num_frames=F)`` then
has a frame axis and its ``decode`` returns (B, F, H, W, 3) frames. Everything else in the rollout is rank-agnostic
(per-sample noise of the latent shape, the samplers' steps, the trajectory's (N, W, ...) stacking), so this is the
one place that knows about frames. ``num_frames`` on an image model is refused rather than ignored: a config that
asks for video and silently trains on images would waste the run.
"""

from __future__ import annotations

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
