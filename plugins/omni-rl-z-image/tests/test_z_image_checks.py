"""Which checkpoints count as the distilled Turbo for ``omni-rl check``'s warning."""

from __future__ import annotations

from pathlib import Path

from omni_rl_z_image.checks import is_distilled
from omni_rl_z_image.config import ZImageConfig


def test_turbo_is_detected_from_the_option_the_name_or_the_tiny_marker(
    tiny_z_path: Path, tiny_turbo_path: Path
) -> None:
    assert is_distilled(ZImageConfig(path="Tongyi-MAI/Z-Image-Turbo"))
    assert not is_distilled(ZImageConfig(path="Tongyi-MAI/Z-Image"))
    assert not is_distilled(ZImageConfig(path="Tongyi-MAI/Z-Image-Turbo", distilled=False))
    assert is_distilled(ZImageConfig(path=str(tiny_turbo_path)))
    assert not is_distilled(ZImageConfig(path=str(tiny_z_path)))
    assert is_distilled(ZImageConfig(path=str(tiny_z_path), distilled=True))
