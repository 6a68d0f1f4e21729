"""``ComponentSpec.check``: a component's checks across sections run with the config, problems listed together."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from core_toys import TOY_CONFIG, ToyLoss, ToyLossConfig, ToyPlugin

from omni_rl import LossSpec, hookimpl
from omni_rl.config import load_config
from omni_rl.errors import ConfigError
from omni_rl.testing import InlinePlugin, make_registry


class CheckedLossPlugin:
    """A loss whose KL term needs the toy sampler's window to stay below 3 (a cross-section rule)."""

    def __init__(self) -> None:
        self.seen: list[set[str]] = []

    def check(self, components: Mapping[str, Any]) -> list[str]:
        self.seen.append(set(components))
        sampler, loss = components.get("sampler"), components["loss"]
        if sampler is not None and loss.options.kl_coef > 0 and sampler.options.window >= 3:
            return [f"invalid value: kl_coef with window {sampler.options.window}; set window < 3 @ $.loss.options"]
        return []

    @hookimpl
    def omni_rl_losses(self) -> list[LossSpec]:
        return [LossSpec(name="checked", factory=lambda c, ctx: ToyLoss(c), config=ToyLossConfig, check=self.check)]


@pytest.fixture
def load(write_config: Callable[[str], Path]) -> tuple[CheckedLossPlugin, Callable[..., Any]]:
    plugin = CheckedLossPlugin()
    registry = make_registry(InlinePlugin(ToyPlugin(), "toys", "1"), InlinePlugin(plugin, "checked", "1"))
    registry.validate()
    path = write_config(TOY_CONFIG.replace("[loss]\n", '[loss]\nname = "checked"\n'))
    return plugin, lambda *sets: load_config(path, list(sets), registry=registry)


def test_the_check_sees_every_valid_section_and_passes(load) -> None:
    plugin, loader = load
    config = loader()
    assert config.components["loss"].name == "checked"
    assert plugin.seen == [{"model", "sampler", "rollout", "advantage", "loss", "reward[0]"}]


def test_a_checks_problem_is_listed_with_the_others(load) -> None:
    _, loader = load
    with pytest.raises(ConfigError) as info:
        loader("sampler.options.window=3", "loss.options.kl_coef=0.5", "model.options.channels=0")
    message = str(info.value)
    assert "(2 problems)" in message
    assert "  - invalid value: kl_coef with window 3; set window < 3 @ $.loss.options\n" in message
    assert "@ $.model.options.channels" in message


def test_a_section_with_invalid_options_is_not_handed_to_checks(load) -> None:
    plugin, loader = load
    with pytest.raises(ConfigError, match=r"(?s)\(1 problem\).*@ \$\.sampler\.options\.window"):
        loader("sampler.options.window=0")
    assert "sampler" not in plugin.seen[-1] and "loss" in plugin.seen[-1]


@pytest.mark.parametrize(
    ("option", "shown"),
    [("cuda_graphs=true", "cuda_graphs = true"), ('attention_backend="flash"', 'attention_backend = "flash"')],
)
def test_cuda_only_model_options_on_cpu_workers_are_refused(load, option: str, shown: str) -> None:
    """qa-2026-12 N11: these passed `check` and were refused only when the CPU worker built the model."""
    _, loader = load
    with pytest.raises(ConfigError) as info:
        loader(f"model.options.{option}", "cluster.gpus_per_worker=0")
    key = option.split("=")[0]
    assert f"  - invalid value: {shown} needs a CUDA GPU (" in str(info.value)
    assert f"but [cluster] gpus_per_worker = 0 runs the workers on the CPU; set {key} = " in str(info.value)
    with pytest.raises(ConfigError) as info:  # on GPU workers only the toy model's own refusal of the key is left
        loader(f"model.options.{option}", "cluster.gpus_per_worker=1")
    assert "gpus_per_worker = 0" not in str(info.value)
