"""A video model's ``num_frames`` against its pipeline's VAE (omni_rl.train.frame_counts), found by ``check`` and by
``run`` before the run directory exists (qa-2026-12 N11: Wan with 4 frames failed in step 1, after Ray and the model
had started, and left a directory that refused the corrected command)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest
from core_toys import TOY_CONFIG, ToyModel, ToyModelConfig, ToyPlugin, ToyRollout

from omni_rl import ModelSpec, RolloutSpec, hookimpl
from omni_rl.cli import main
from omni_rl.config import load_config
from omni_rl.config.schema import ResolvedConfig
from omni_rl.registry import Registry
from omni_rl.testing import InlinePlugin, make_registry
from omni_rl.train.preflight import preflight_problems


@attrs.frozen(kw_only=True)
class FramesRolloutConfig:
    group_size: int = 2
    num_frames: int = 1


class VideoPlugin:
    @hookimpl
    def omni_rl_models(self) -> list[ModelSpec]:
        return [
            ModelSpec(name="toy_video", factory=lambda c, ctx: ToyModel(c), config=ToyModelConfig, modality="video")
        ]

    @hookimpl
    def omni_rl_rollout_backends(self) -> list[RolloutSpec]:
        return [RolloutSpec(name="frames", factory=lambda c, ctx: ToyRollout(c), config=FramesRolloutConfig)]


def _pipeline(root: Path, factor: int | None) -> Path:
    """A pipeline directory as far as the check reads it: model_index.json and the VAE's config."""
    (root / "vae").mkdir(parents=True)
    (root / "model_index.json").write_text("{}")
    vae = {"_class_name": "AutoencoderKLWan"} | ({"scale_factor_temporal": factor} if factor is not None else {})
    (root / "vae" / "config.json").write_text(json.dumps(vae))
    return root


@pytest.fixture
def registry() -> Registry:
    registry = make_registry(InlinePlugin(ToyPlugin(), "toys", "1"), InlinePlugin(VideoPlugin(), "video", "1"))
    registry.validate()
    return registry


@pytest.fixture
def load(registry: Registry, write_config: Callable[..., Path], tmp_path: Path) -> Callable[..., ResolvedConfig]:
    path = write_config(TOY_CONFIG)

    def loader(pipeline: Path, frames: int) -> ResolvedConfig:
        sets = ['model.name="toy_video"', f"model.options.path={pipeline}", 'rollout.name="frames"']
        sets += [f"rollout.options.num_frames={frames}", f"run.output_dir={tmp_path / 'run'}"]
        return load_config(path, sets, registry=registry)

    return loader


def test_frames_must_be_one_plus_a_multiple_of_the_vaes_time_compression(
    load: Callable[..., ResolvedConfig], tmp_path: Path
) -> None:
    wan = _pipeline(tmp_path / "wan", 4)
    for frames in (1, 5, 81):
        assert preflight_problems(load(wan, frames)) == []
    (problem,) = preflight_problems(load(wan, 4))
    assert problem == (
        f"num_frames = 4 is not supported by the 'toy_video' pipeline at '{wan}': its VAE compresses time 4x after "
        "the first frame, so num_frames must be 4k + 1; use 1 or 5 @ $.rollout.options.num_frames"
    )
    # a VAE without time compression (the shapes-motion pipeline's) takes any count; an unknown one is left alone
    assert preflight_problems(load(_pipeline(tmp_path / "motion", 1), 6)) == []
    assert preflight_problems(load(_pipeline(tmp_path / "other", None), 6)) == []


def test_run_refuses_it_before_the_run_directory_exists(
    registry: Registry,
    use_registry: Callable[[Registry], Registry],
    write_config: Callable[..., Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    use_registry(registry)
    wan, run_dir, prompts = _pipeline(tmp_path / "wan", 4), tmp_path / "run", tmp_path / "prompts.txt"
    prompts.write_text("a red square\n")
    sets = ['model.name="toy_video"', f"model.options.path={wan}", 'rollout.name="frames"']
    sets += ["rollout.options.num_frames=4", f"run.output_dir={run_dir}", f"data.train={prompts}"]
    argv = [str(write_config(TOY_CONFIG)), *[arg for s in sets for arg in ("--set", s)]]
    for command in ("check", "run"):
        assert main([command, *argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and "num_frames must be 4k + 1" in err and "Traceback" not in err
    assert not run_dir.exists()
