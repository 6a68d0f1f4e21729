"""Validation's sampling plan: which prompts and seeds the val rollout asks for, and what it averages."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from core_toys import TOY_CONFIG

from omni_rl.config import load_config
from omni_rl.errors import ConfigError
from omni_rl.protocols import RolloutOutcome, RolloutRequest
from omni_rl.registry import Registry
from omni_rl.train.trainer import Trainer

WriteConfig = Callable[..., Path]


class RecordingGroup:
    """Stands in for the worker group: remembers the request, returns images whose brightness is the seed's
    parity, so the toy brightness reward scores each image 0 or 1 by seed."""

    def __init__(self) -> None:
        self.requests: list[RolloutRequest] = []

    def rollout(self, request: RolloutRequest) -> RolloutOutcome:
        self.requests.append(request)
        images = np.stack([np.full((8, 8, 3), 255 * (s % 2), dtype=np.uint8) for s in request.seeds])
        return RolloutOutcome(images=images, prompts=request.prompts, group_ids=np.asarray(request.group_ids))


def _trainer(write_config: WriteConfig, registry: Registry, tmp_path: Path, data: str) -> Trainer:
    (tmp_path / "train.txt").write_text("t1\nt2\n")
    (tmp_path / "val.txt").write_text("v1\nv2\nv3\n")
    text = TOY_CONFIG + f'\n[data]\ntrain = "{tmp_path / "train.txt"}"\nval = "{tmp_path / "val.txt"}"\n{data}\n'
    return Trainer(load_config(write_config(text), registry=registry))


def test_each_val_prompt_gets_its_own_fixed_seeds(
    write_config: WriteConfig, toy_registry: Registry, tmp_path: Path
) -> None:
    trainer = _trainer(write_config, toy_registry, tmp_path, "val_images_per_prompt = 4")
    group = RecordingGroup()
    metrics = trainer.validate(group, 0, tmp_path)  # type: ignore[arg-type]
    trainer.validate(group, 5, tmp_path)  # type: ignore[arg-type]
    first, again = group.requests
    assert first.prompts == ["v1"] * 4 + ["v2"] * 4 + ["v3"] * 4
    assert len(set(first.seeds)) == 12 and first.seeds == again.seeds  # distinct, and the same every time
    assert first.mode == "eval" and not first.record_trajectory
    brightness = [float(s % 2) for s in first.seeds]
    assert metrics["val/reward/mean"] == pytest.approx(2.0 * np.mean(brightness))  # weight 2, all 12 images
    assert (tmp_path / "val_step_0.png").is_file()


def test_each_prompts_first_image_does_not_depend_on_the_count(
    write_config: WriteConfig, toy_registry: Registry, tmp_path: Path
) -> None:
    one, four = RecordingGroup(), RecordingGroup()
    _trainer(write_config, toy_registry, tmp_path, "").validate(one, 0, tmp_path)  # type: ignore[arg-type]
    _trainer(write_config, toy_registry, tmp_path, "val_images_per_prompt = 4").validate(four, 0, tmp_path)  # type: ignore[arg-type]
    assert one.requests[0].prompts == ["v1", "v2", "v3"]
    assert one.requests[0].seeds == four.requests[0].seeds[::4]  # each prompt's first image is the same one


def test_val_images_per_prompt_must_be_positive(write_config: WriteConfig, toy_registry: Registry) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write_config(TOY_CONFIG + "\n[data]\nval_images_per_prompt = 0\n"), registry=toy_registry)
    assert "@ $.data.val_images_per_prompt" in caught.value.message
