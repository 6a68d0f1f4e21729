"""The plugin's hooks module: discovery, spec records, light imports (omni_rl.testing's plugin suite)."""

from __future__ import annotations

import pytest

from omni_rl.testing import PluginConformance


class TestRewardsRemotePlugin(PluginConformance):
    @pytest.fixture
    def hooks_module(self) -> str:
        return "omni_rl_rewards_remote.hooks"
