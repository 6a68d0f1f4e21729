"""``ComponentSpec.preflight``: each component's own check of this machine and of the prompts it will see, run by
``omni-rl check`` (through ``train.preflight``) and before ``serve-reward`` starts a local Ray, never when a config is
only loaded (toy components, no Ray)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from core_toys import TOY_CONFIG, ToyPlugin, ToyReward

from omni_rl import RewardSpec, hookimpl
from omni_rl.config import load_config
from omni_rl.config.component_preflight import component_preflight_problems, served_preflight_problems
from omni_rl.config.schema import ResolvedConfig
from omni_rl.testing import InlinePlugin, make_registry
from omni_rl.train.preflight import preflight_problems


class PreflightPlugin:
    """``needy`` records what its preflight was given and reports one problem; ``broken``'s preflight raises."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, list[str]]]] = []

    def needy(self, component: Any, prompts: Mapping[str, Sequence[Any]]) -> list[str]:
        self.calls.append((component.path, {path: [r.prompt for r in records] for path, records in prompts.items()}))
        return [f"needy needs a thing; give it one @ {component.path}.options"]

    def broken(self, component: Any, prompts: Mapping[str, Sequence[Any]]) -> list[str]:
        raise ValueError("the check itself is wrong")

    @hookimpl
    def omni_rl_reward_models(self) -> list[RewardSpec]:
        def build(config: Any, ctx: Any) -> ToyReward:
            return ToyReward(config)

        return [
            RewardSpec(name="needy", factory=build, preflight=self.needy),
            RewardSpec(name="broken", factory=build, preflight=self.broken),
        ]


@pytest.fixture
def plugin() -> PreflightPlugin:
    return PreflightPlugin()


@pytest.fixture
def load(write_config: Callable[..., Path], tmp_path: Path, plugin: PreflightPlugin) -> Callable[..., ResolvedConfig]:
    registry = make_registry(InlinePlugin(ToyPlugin(), "toys", "1"), InlinePlugin(plugin, "preflights", "2.0"))
    registry.validate()
    train, val = tmp_path / "train.txt", tmp_path / "val.jsonl"
    train.write_text("a cat\na dog\n", encoding="utf-8")
    val.write_text("\n".join(json.dumps({"prompt": p}) for p in ("v1", "v2", "v3")) + "\n", encoding="utf-8")
    path = write_config(TOY_CONFIG)

    def loader(*sets: str) -> ResolvedConfig:
        base = [f"run.output_dir={tmp_path / 'run'}", f"data.train={train}", f"data.val={val}"]
        return load_config(path, [*base, *sets], registry=registry)

    return loader


def test_each_component_gets_the_prompts_it_will_see(load: Callable[..., ResolvedConfig], plugin) -> None:
    """A trained reward sees train and (validation on) the first val_prompts val prompts; an eval reward the val
    prompts only; a component without a preflight is not asked."""
    config = load(
        'reward=[{name = "toy_brightness"}, {name = "needy"}]',
        'eval_reward=[{name = "needy"}]',
        "run.eval_every=1",
        "data.val_prompts=2",
    )
    problems = component_preflight_problems(config)
    assert problems == [
        "needy needs a thing; give it one @ $.reward[1].options",
        "needy needs a thing; give it one @ $.eval_reward[0].options",
    ]
    assert plugin.calls == [
        ("$.reward[1]", {"$.data.train": ["a cat", "a dog"], "$.data.val": ["v1", "v2"]}),
        ("$.eval_reward[0]", {"$.data.val": ["v1", "v2"]}),
    ]


def test_without_validation_the_val_prompts_are_not_passed(load: Callable[..., ResolvedConfig], plugin) -> None:
    component_preflight_problems(load('reward=[{name = "needy"}]'))
    assert plugin.calls == [("$.reward[0]", {"$.data.train": ["a cat", "a dog"]})]


def test_check_lists_them_with_its_other_problems(load: Callable[..., ResolvedConfig]) -> None:
    assert "needy needs a thing; give it one @ $.reward[0].options" in preflight_problems(
        load('reward=[{name = "needy"}]')
    )


def test_a_preflight_that_raises_is_one_line_blaming_its_plugin(load: Callable[..., ResolvedConfig]) -> None:
    (problem,) = component_preflight_problems(load('reward=[{name = "broken"}]'))
    assert "reward 'broken' (preflights 2.0): its preflight check failed with ValueError: the check itself" in problem
    assert problem.endswith("@ $.reward[0]")


def test_loading_a_config_runs_no_preflight(load: Callable[..., ResolvedConfig], plugin) -> None:
    load('reward=[{name = "needy"}]', 'eval_reward=[{name = "broken"}]', "run.eval_every=1")
    assert plugin.calls == []


def test_a_served_reward_is_asked_without_prompts(load: Callable[..., ResolvedConfig], plugin) -> None:
    config = load('reward=[{name = "needy"}]')
    assert served_preflight_problems(config.rewards) == ["needy needs a thing; give it one @ $.reward[0].options"]
    assert plugin.calls == [("$.reward[0]", {})]
