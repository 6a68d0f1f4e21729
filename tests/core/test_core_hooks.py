"""One test per hook: an inline plugin implementing it contributes a record of the hook's kind.

(The meta-test in tests/core/test_meta.py checks that every hook in omni_rl.hookspecs is named here.)
"""

from __future__ import annotations

from typing import Any

from omni_rl import (
    AdvantageSpec,
    AlgorithmSpec,
    LossSpec,
    ModelSpec,
    RewardSpec,
    RolloutSpec,
    SamplerSpec,
    hookimpl,
)
from omni_rl.specs import ComponentSpec
from omni_rl.testing import InlinePlugin, make_registry


def _factory(config: Any, ctx: Any) -> Any:
    return config


def _only(plugin: object, kind: str) -> ComponentSpec:
    registry = make_registry(InlinePlugin(plugin, "hook-test", "1.0"))
    (info,) = registry.plugins
    assert info.status == "active", info.error
    (component,) = registry.components
    assert component.kind == kind
    return registry.get(kind, component.name)


def test_omni_rl_models() -> None:
    class Plugin:
        @hookimpl
        def omni_rl_models(self) -> list[ModelSpec]:
            return [ModelSpec(name="acme.tiny", factory=_factory, summary="m")]

    assert _only(Plugin(), "model").name == "acme.tiny"


def test_omni_rl_samplers() -> None:
    class Plugin:
        @hookimpl
        def omni_rl_samplers(self) -> list[SamplerSpec]:
            return [SamplerSpec(name="sde", factory=_factory, aliases=("flow",))]

    assert _only(Plugin(), "sampler").aliases == ("flow",)


def test_omni_rl_rollout_backends() -> None:
    class Plugin:
        @hookimpl
        def omni_rl_rollout_backends(self) -> list[RolloutSpec]:
            return [RolloutSpec(name="local", factory=_factory)]

    assert _only(Plugin(), "rollout").name == "local"


def test_omni_rl_reward_models() -> None:
    class Plugin:
        @hookimpl
        def omni_rl_reward_models(self) -> list[RewardSpec]:
            return [RewardSpec(name="ocr", factory=_factory)]

    assert _only(Plugin(), "reward").name == "ocr"


def test_omni_rl_advantage_estimators() -> None:
    class Plugin:
        @hookimpl
        def omni_rl_advantage_estimators(self) -> list[AdvantageSpec]:
            return [AdvantageSpec(name="grpo", factory=_factory)]

    assert _only(Plugin(), "advantage").name == "grpo"


def test_omni_rl_losses() -> None:
    class Plugin:
        @hookimpl
        def omni_rl_losses(self) -> list[LossSpec]:
            return [LossSpec(name="acme.my_loss", factory=_factory)]

    assert _only(Plugin(), "loss").name == "acme.my_loss"


def test_omni_rl_algorithms() -> None:
    class Plugin:
        @hookimpl
        def omni_rl_algorithms(self) -> list[AlgorithmSpec]:
            return [AlgorithmSpec(name="preset", defaults={"loss": {"name": "acme.my_loss"}})]

    spec = _only(Plugin(), "algorithm")
    assert isinstance(spec, AlgorithmSpec) and spec.defaults == {"loss": {"name": "acme.my_loss"}}
