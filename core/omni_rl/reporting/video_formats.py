"""The ``[log] video_format`` values and what this machine can write, kept apart from omni_rl.reporting.video_grids so
that
validating a config imports neither Pillow nor PyAV: "auto" is H.264 MP4 where PyAV is installed (``pip install
av``, or ``omni-rl[video]``), else animated WebP where Pillow has WebP, else GIF."""

from __future__ import annotations

import functools

#: ``[log] video_format`` values
VIDEO_FORMATS = ("auto", "mp4", "webp", "gif")
#: H.264 encoders in the order tried (PyAV's wheels ship libx264)
MP4_ENCODERS = ("libx264", "h264")


def _pillow_writes_webp() -> bool:
    from PIL import features

    return bool(features.check("webp"))


@functools.cache
def mp4_encoder() -> str | None:
    """The H.264 encoder PyAV offers here, or None without PyAV (or without one)."""
    try:
        import av
    except ImportError:
        return None
    for name in MP4_ENCODERS:
        try:
            av.codec.Codec(name, "w")
        except Exception:  # PyAV's UnknownCodecError; any failure means "not this one"
            continue
        return name
    return None


def video_format_problem(video_format: str) -> str | None:
    """Why ``video_format`` cannot be written here (with the fix), or None when it can."""
    if video_format not in VIDEO_FORMATS:
        return f"unknown video format {video_format!r}; available: {', '.join(VIDEO_FORMATS)}"
    if video_format == "mp4" and mp4_encoder() is None:
        return "'mp4' needs PyAV with an H.264 encoder: pip install av (or omni-rl[video]), or use \"auto\""
    if video_format == "webp" and not _pillow_writes_webp():
        return 'this Pillow cannot write WebP: use "gif" or "auto", or install a Pillow built with libwebp'
    return None


def video_suffix(video_format: str = "auto") -> str:
    """The animated grid's file suffix for ``[log] video_format``: ``"auto"`` is ``.mp4`` where PyAV can encode
    H.264, else ``.webp`` where Pillow can write animated WebP, else ``.gif``."""
    if video_format in ("mp4", "webp", "gif"):
        return f".{video_format}"
    if mp4_encoder() is not None:
        return ".mp4"
    return ".webp" if _pillow_writes_webp() else ".gif"
