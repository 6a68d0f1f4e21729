"""docs/examples/sd35_pickscore.toml: valid as shipped, and its reward section scores with tiny local weights."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from omni_rl.cli import main
from omni_rl.config import load_config
from omni_rl.context import BuildContext

ROOT = Path(__file__).parents[3]
EXAMPLE = ROOT / "docs" / "examples" / "sd35_pickscore.toml"


@pytest.fixture(autouse=True)
def _at_repository_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """The example's prompt files are relative to the repository root, where its command is run."""
    monkeypatch.chdir(ROOT)


def _tiny_overrides(tiny_clip_dir: Path) -> list[str]:
    return [
        f"reward.0.options.model={tiny_clip_dir.as_posix()}",
        f"reward.0.options.processor={tiny_clip_dir.as_posix()}",
        "reward.0.options.dtype=float32",
    ]


def test_example_passes_check(tiny_clip_dir: Path) -> None:
    assert main(["check", str(EXAMPLE)]) == 0
    overrides = [part for item in _tiny_overrides(tiny_clip_dir) for part in ("--set", item)]
    assert main(["check", str(EXAMPLE), *overrides]) == 0


def test_example_reward_scores_with_tiny_weights(tiny_clip_dir: Path, sample_images: np.ndarray) -> None:
    config = load_config(EXAMPLE, _tiny_overrides(tiny_clip_dir))
    (section,) = config.rewards
    assert section.name == "pickscore" and section.options.scale == 26.0
    reward = section.build(BuildContext())
    result = reward(sample_images, ["a cat"] * len(sample_images), [{}] * len(sample_images))
    assert result.scores.shape == (len(sample_images),) and np.isfinite(result.scores).all()
