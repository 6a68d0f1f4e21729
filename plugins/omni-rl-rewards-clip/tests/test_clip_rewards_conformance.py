"""omni-rl's reward conformance suite on every reward of the plugin (tiny local models), and its hooks module."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from clip_tiny_models import reward_spec

from omni_rl.specs import RewardSpec
from omni_rl.testing import PluginConformance, RewardConformance


class TestRewardsClipPlugin(PluginConformance):
    heavy_modules = (*PluginConformance.heavy_modules, "huggingface_hub", "PIL")

    @pytest.fixture
    def hooks_module(self) -> str:
        return "omni_rl_rewards_clip.hooks"


class TestPickScore(RewardConformance):
    @pytest.fixture
    def spec(self) -> RewardSpec:
        return reward_spec("pickscore")

    @pytest.fixture
    def options(self, tiny_clip_dir: Path) -> dict[str, Any]:
        return {"model": str(tiny_clip_dir), "processor": str(tiny_clip_dir), "scale": 1.0, "batch_size": 3}


class TestClipScore(RewardConformance):
    @pytest.fixture
    def spec(self) -> RewardSpec:
        return reward_spec("clip_score")

    @pytest.fixture
    def options(self, tiny_clip_dir: Path) -> dict[str, Any]:
        return {"model": str(tiny_clip_dir), "factor": 2.5, "clamp_at_zero": True, "prompt_prefix": "A photo depicts "}


class TestHpsV2(RewardConformance):
    @pytest.fixture
    def spec(self) -> RewardSpec:
        return reward_spec("hpsv2")

    @pytest.fixture
    def options(self, tiny_processor_dir: Path, tiny_hps_file: Path) -> dict[str, Any]:
        return {"model": str(tiny_hps_file), "processor": str(tiny_processor_dir), "dtype": "bfloat16"}


class TestAesthetic(RewardConformance):
    @pytest.fixture
    def spec(self) -> RewardSpec:
        return reward_spec("aesthetic")

    @pytest.fixture
    def options(self, tiny_clip_dir: Path, tiny_aesthetic_file: Path) -> dict[str, Any]:
        return {"model": str(tiny_clip_dir), "predictor": str(tiny_aesthetic_file), "device": "cpu"}


class TestImageSimilarityClip(RewardConformance):
    """Reads condition images: the suite hands it random sources (RewardConformance's ``conditions``)."""

    @pytest.fixture
    def spec(self) -> RewardSpec:
        return reward_spec("image_similarity")

    @pytest.fixture
    def options(self, tiny_clip_dir: Path) -> dict[str, Any]:
        return {"model": str(tiny_clip_dir), "batch_size": 3}


class TestImageSimilarityDino(RewardConformance):
    @pytest.fixture
    def spec(self) -> RewardSpec:
        return reward_spec("image_similarity")

    @pytest.fixture
    def options(self, tiny_dinov2_dir: Path) -> dict[str, Any]:
        return {"backbone": "dino", "model": str(tiny_dinov2_dir), "source_images": "mean"}
