"""Discovery: the entry point and the hook's records (the light hooks import is in the conformance module)."""

from __future__ import annotations

from importlib.metadata import entry_points

import pluggy

from omni_rl import hookspecs
from omni_rl.context import BuildContext
from omni_rl.protocols import RewardModel
from omni_rl.specs import RewardSpec

NAMES = {"jpeg_incompressibility", "jpeg_compressibility", "ocr"}


def test_entry_point_registers_the_rewards() -> None:
    (entry,) = [ep for ep in entry_points(group=hookspecs.PROJECT_NAME) if ep.value == "omni_rl_rewards.hooks"]
    manager = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    manager.add_hookspecs(hookspecs)
    manager.register(entry.load(), name=entry.name)
    specs = [spec for result in manager.hook.omni_rl_reward_models() for spec in result]
    assert {spec.name for spec in specs} == NAMES
    assert all(isinstance(spec, RewardSpec) and spec.summary for spec in specs)


def test_factories_build_reward_models_with_default_options() -> None:
    from omni_rl_rewards.hooks import omni_rl_reward_models

    for spec in omni_rl_reward_models():
        reward = spec.factory(spec.config(), BuildContext())
        assert isinstance(reward, RewardModel), spec.name
