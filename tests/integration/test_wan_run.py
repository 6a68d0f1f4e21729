"""End to end: `omni-rl run` on the wan_tiny_jpeg example (Flow-GRPO on a tiny random Wan2.1-layout text-to-video
pipeline, JPEG compressibility averaged over frames): video through rollout, reward, update and run directory."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from omni_rl.cli import main
from omni_rl.videos import video_suffix

EXAMPLE = Path(__file__).parents[2] / "docs" / "examples" / "wan_tiny_jpeg.toml"
FRAMES, SIZE = 5, 32


@pytest.fixture(scope="module")
def tiny_wan(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from omni_rl_wan.tiny import build_tiny_wan_pipeline

    return Path(build_tiny_wan_pipeline(tmp_path_factory.mktemp("wan") / "tiny", seed=0))


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory, tiny_wan: Path, ray_cluster: None) -> Path:
    """The example as a user runs it; only the output directory and the tiny pipeline's path are set here."""
    out = tmp_path_factory.mktemp("run") / "wan"
    code = main(["run", str(EXAMPLE), "--set", f"run.output_dir={out}", "--set", f"model.options.path={tiny_wan}"])
    assert code == 0
    return out


def _metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_every_step_trains_on_video_rewards(run_dir: Path) -> None:
    rows = _metrics(run_dir)
    assert [row["step"] for row in rows] == [1, 2, 3, 4]
    for row in rows:
        assert np.isfinite(row["reward/mean"]) and row["reward/mean"] < 0  # -kB of JPEG per frame
        assert np.isfinite(row["actor/loss"]) and row["actor/grad_norm"] > 0
    assert rows[0]["actor/ratio_mean"] == pytest.approx(1.0, abs=1e-6)  # on-policy at the first step
    assert np.isfinite(rows[-1]["val/reward/mean"])


@pytest.mark.parametrize("name", ["samples_step_1", "samples_step_4", "val_step_4"])
def test_the_run_directory_gets_videos_and_frame_grids(run_dir: Path, name: str) -> None:
    with Image.open(run_dir / f"{name}{video_suffix()}") as video:
        assert video.n_frames == FRAMES
    with Image.open(run_dir / f"{name}.png") as grid:
        assert grid.width >= 4 * FRAMES * SIZE or name.startswith("val")  # four videos a row, frames side by side


def test_the_checkpoint_lora_loads_into_wan_pipeline_and_changes_the_video(run_dir: Path, tiny_wan: Path) -> None:
    from diffusers import WanPipeline

    pipe = WanPipeline.from_pretrained(tiny_wan)
    pipe.set_progress_bar_config(disable=True)

    def video() -> np.ndarray:
        generator = torch.Generator().manual_seed(0)
        kwargs = {"height": SIZE, "width": SIZE, "num_frames": FRAMES, "num_inference_steps": 4, "guidance_scale": 4.0}
        return pipe("a red apple on a table", generator=generator, output_type="np", **kwargs).frames

    before = video()
    pipe.load_lora_weights(run_dir / "checkpoints" / "step_4")
    assert np.abs(video() - before).max() > 1 / 255
