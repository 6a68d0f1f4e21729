"""Testing helpers for omni-rl plugins: conformance suites per component kind, and fixtures.

A plugin's tests subclass the suite of each component it provides and give it the record::

    from omni_rl.testing import LossConformance
    from acme_losses.hooks import omni_rl_losses

    class TestMyLoss(LossConformance):
        @pytest.fixture
        def spec(self):
            return omni_rl_losses()[0]

The suites are plain classes (pytest only collects the ``Test*`` subclass). The fixtures are opt-in:
``pytest_plugins = ["omni_rl.testing.fixtures"]`` in the plugin's top-level ``conftest.py``.
"""

from __future__ import annotations

from omni_rl.testing._base import SpecConformance
from omni_rl.testing.advantage import AdvantageConformance
from omni_rl.testing.algorithm import AlgorithmConformance
from omni_rl.testing.benchmark import BenchmarkConformance
from omni_rl.testing.distributions import write_fake_distribution
from omni_rl.testing.inline import InlinePlugin, make_manager, make_registry
from omni_rl.testing.loss import LossConformance
from omni_rl.testing.model import ModelConformance
from omni_rl.testing.plugin import PluginConformance
from omni_rl.testing.reward import RewardConformance
from omni_rl.testing.rollout import RolloutConformance
from omni_rl.testing.sampler import SamplerConformance

__all__ = [
    "AdvantageConformance",
    "AlgorithmConformance",
    "BenchmarkConformance",
    "InlinePlugin",
    "LossConformance",
    "ModelConformance",
    "PluginConformance",
    "RewardConformance",
    "RolloutConformance",
    "SamplerConformance",
    "SpecConformance",
    "make_manager",
    "make_registry",
    "write_fake_distribution",
]
