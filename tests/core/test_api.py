"""The Python API: get_registry, build, load_config, and what plugin authors import from omni_rl."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from core_fake_dists import LIGHT_HOOKS
from core_toys import ToyLoss

import omni_rl
from omni_rl import BuildContext, build, get_registry, hookspecs
from omni_rl.errors import ConfigError, PluginError
from omni_rl.registry import Registry


def test_get_registry_loads_installed_plugins_once(
    fake_distribution: Callable[..., Path], plugin_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_distribution(
        "acme-toys", "1.0", entry_points={"toys": "acme_toys.hooks"}, modules={"acme_toys.hooks": LIGHT_HOOKS}
    )
    monkeypatch.setenv("OMNI_RL_LOAD_PLUGINS", "acme-toys")
    registry = get_registry()
    assert registry.get("loss", "toy_ppo").summary == "toy loss"
    assert get_registry() is registry
    assert get_registry(reload=True) is not registry


def test_build_structures_options_and_calls_the_factory(
    use_registry: Callable[[Registry], Registry], toy_registry: Registry
) -> None:
    use_registry(toy_registry)
    loss = build("loss", "toy_ppo", {"clip_ratio": 0.3})
    assert isinstance(loss, ToyLoss) and loss.clip_ratio == 0.3
    assert build("loss", "toy_ppo").clip_ratio == 0.2


def test_build_uses_the_registry_of_the_context(toy_registry: Registry, plugin_env: None) -> None:
    omni_rl.set_registry(Registry([], []))  # the global one has nothing
    loss = build("loss", "toy_ppo", ctx=BuildContext(registry=toy_registry))
    assert isinstance(loss, ToyLoss)


def test_build_reports_bad_options_like_a_config(
    use_registry: Callable[[Registry], Registry], toy_registry: Registry
) -> None:
    use_registry(toy_registry)
    with pytest.raises(ConfigError) as caught:
        build("sampler", "toy_sde", {"noise_level": -1, "windw": 2})
    assert caught.value.message.splitlines() == [
        "invalid options for sampler 'toy_sde' (2 problems):",
        "  - invalid value: 'noise_level' must be >= 0: -1.0 @ $.sampler.options.noise_level",
        "  - unknown key 'windw' (did you mean 'window'?) @ $.sampler.options",
    ]


def test_build_an_unknown_component(use_registry: Callable[[Registry], Registry], toy_registry: Registry) -> None:
    use_registry(toy_registry)
    with pytest.raises(PluginError, match=r"unknown loss 'toy_pp'; did you mean 'toy_ppo'\?"):
        build("loss", "toy_pp")


def test_plugin_authors_import_everything_from_omni_rl() -> None:
    assert omni_rl.hookimpl is hookspecs.hookimpl
    for name in ("ModelSpec", "SamplerSpec", "RolloutSpec", "RewardSpec", "AdvantageSpec", "LossSpec", "AlgorithmSpec"):
        assert name in omni_rl.__all__ and hasattr(omni_rl, name)


def test_importing_omni_rl_stays_light() -> None:
    """Every plugin's hooks.py imports omni_rl: it must not pull in torch, cattrs or rich."""
    code = (
        "import json, sys, omni_rl; "
        "print(json.dumps([m for m in ('torch', 'cattrs', 'rich', 'numpy', 'tomli') if m in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert json.loads(out) == []
