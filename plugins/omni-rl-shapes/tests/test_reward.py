"""The ``shapes`` reward through its hook: spec, config validation, protocol, batch scoring, errors."""

from __future__ import annotations

from importlib.metadata import entry_points

import attrs
import numpy as np
import pluggy
import pytest
from omni_rl_shapes import hooks
from omni_rl_shapes.config import ShapesRewardConfig
from omni_rl_shapes.render import render_batch

from omni_rl import hookspecs
from omni_rl.batch import RewardResult
from omni_rl.context import BuildContext
from omni_rl.errors import RuntimeFailure
from omni_rl.protocols import RewardModel
from omni_rl.specs import RewardSpec


def _spec() -> RewardSpec:
    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    pm.register(hooks)
    (specs,) = pm.hook.omni_rl_reward_models()
    (spec,) = [s for s in specs if s.name == "shapes"]  # the plugin also provides shapes_motion
    return spec


def test_entry_point_is_installed() -> None:
    (ep,) = [ep for ep in entry_points(group="omni_rl") if ep.name == "shapes"]
    assert ep.value == "omni_rl_shapes.hooks"


def test_spec() -> None:
    spec = _spec()
    assert isinstance(spec, RewardSpec)
    assert spec.name == "shapes"
    assert spec.config is ShapesRewardConfig
    assert attrs.has(spec.config)


def test_config_validates() -> None:
    with pytest.raises(ValueError):
        ShapesRewardConfig(min_area=0.0)
    with pytest.raises(ValueError):
        ShapesRewardConfig(min_shape_iou=1.5)
    with pytest.raises(TypeError):
        ShapesRewardConfig(size=3)  # type: ignore[call-arg]


def test_scores_a_batch_with_sub_scores() -> None:
    reward = _spec().factory(ShapesRewardConfig(), BuildContext())
    assert isinstance(reward, RewardModel)
    prompts = ["a red circle", "two blue squares", "a green triangle left of a yellow circle"]
    images = render_batch(prompts, size=32, seeds=[0, 1, 2])
    result = reward(images, prompts, [{}] * 3)
    assert isinstance(result, RewardResult)
    np.testing.assert_array_equal(result.scores, [1, 1, 1])
    assert set(result.details) == {"color", "count", "shape", "position", "strict"}
    # images of the wrong prompts, rotated by one
    rotated = reward(images[[1, 2, 0]], prompts, [{}] * 3)
    assert rotated.scores.shape == (3,)
    assert rotated.scores.max() < 0.5
    assert all(v.shape == (3,) and v.dtype == np.float64 for v in rotated.details.values())
    assert ((rotated.scores >= 0) & (rotated.scores <= 1)).all()


def test_empty_batch() -> None:
    result = _spec().factory(ShapesRewardConfig(), BuildContext())(np.zeros((0, 32, 32, 3), np.uint8), [], [])
    assert result.scores.shape == (0,)


def test_errors() -> None:
    reward = _spec().factory(ShapesRewardConfig(), BuildContext())
    images = render_batch(["a red circle"], size=32)
    with pytest.raises(RuntimeFailure) as info:
        reward(images, ["a photo of a cat"], [{}])
    assert info.value.hint and "prompts/train.txt" in info.value.hint
    with pytest.raises(ValueError):
        reward(images.astype(np.float32), ["a red circle"], [{}])
    with pytest.raises(ValueError):
        reward(images, ["a red circle", "a red circle"], [{}, {}])
