"""The core's conformance suites for the ``shapes`` reward and for the plugin's hooks module (the image suite does
not apply to ``shapes_motion``, which scores clips: tests/test_motion.py)."""

from __future__ import annotations

import numpy as np
import pytest
from omni_rl_shapes.hooks import omni_rl_reward_models

from omni_rl.specs import RewardSpec
from omni_rl.testing.plugin import PluginConformance
from omni_rl.testing.reward import RewardConformance


class TestShapesReward(RewardConformance):
    @pytest.fixture
    def spec(self) -> RewardSpec:
        (spec,) = [s for s in omni_rl_reward_models() if s.name == "shapes"]
        return spec

    @pytest.fixture
    def prompts(self, images: np.ndarray) -> list[str]:
        grammar = ["a red circle", "two blue squares", "a green triangle left of a yellow circle", "a blue square"]
        return [grammar[i % len(grammar)] for i in range(len(images))]


class TestShapesPlugin(PluginConformance):
    @pytest.fixture
    def hooks_module(self) -> str:
        return "omni_rl_shapes.hooks"
