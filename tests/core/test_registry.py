"""The registry: conflicts (all at once, naming both sides), unknown names, broken hooks, listing."""

from __future__ import annotations

from typing import Any

import pytest

from omni_rl import AlgorithmSpec, LossSpec, ModelSpec, SamplerSpec, hookimpl
from omni_rl.errors import PluginError
from omni_rl.plugins import PluginInfo
from omni_rl.registry import Registry
from omni_rl.testing import InlinePlugin, make_manager, make_registry


def _factory(config: Any, ctx: Any) -> Any:
    return config


class Losses:
    def __init__(self, *names: str, aliases: tuple[str, ...] = ()) -> None:
        self.names = names
        self.aliases = aliases

    @hookimpl
    def omni_rl_losses(self) -> list[LossSpec]:
        # the aliases belong to the first name
        return [
            LossSpec(name=n, factory=_factory, aliases=self.aliases if i == 0 else (), summary=f"loss {n}")
            for i, n in enumerate(self.names)
        ]


class Samplers:
    def __init__(self, *names: str) -> None:
        self.names = names

    @hookimpl
    def omni_rl_samplers(self) -> list[SamplerSpec]:
        return [SamplerSpec(name=n, factory=_factory) for n in self.names]


def test_two_distributions_providing_one_name_is_a_conflict_naming_both() -> None:
    registry = make_registry(
        InlinePlugin(Losses("acme.clip"), "acme-losses", "1.0"),
        InlinePlugin(Losses("acme.clip"), "other-losses", "2.0"),
    )
    with pytest.raises(PluginError) as caught:
        registry.validate()
    assert caught.value.message == (
        "conflicting plugins:\n  - loss 'acme.clip' is provided by both acme-losses 1.0 and other-losses 2.0"
    )
    assert caught.value.hint == (
        "component names are never overwritten or renamed: uninstall one of the distributions "
        "(pip uninstall other-losses) or switch one off with OMNI_RL_DISABLE_PLUGINS=other-losses; "
        "`omni-rl plugins` lists every plugin"
    )
    assert caught.value.exit_code == 2


def test_every_conflict_is_reported_at_once_and_aliases_count() -> None:
    registry = make_registry(
        InlinePlugin(Losses("shared", "mine"), "dist-a", "1.0"),
        InlinePlugin(Losses("shared", "theirs", aliases=("mine",)), "dist-b", "2.0"),
        InlinePlugin(Samplers("sde"), "dist-c", "0.1"),
        InlinePlugin(Samplers("sde"), "dist-d", "0.2"),
        InlinePlugin(Samplers("sde"), "dist-e", "0.3"),
    )
    with pytest.raises(PluginError) as caught:
        registry.validate()
    assert caught.value.message.splitlines() == [
        "conflicting plugins:",
        "  - sampler 'sde' is provided by dist-c 0.1, dist-d 0.2 and dist-e 0.3",
        "  - loss 'mine' is provided by both dist-a 1.0 and dist-b 2.0 (alias of 'shared')",
        "  - loss 'shared' is provided by both dist-a 1.0 and dist-b 2.0",
    ]


def test_a_conflicting_registry_still_lists_everything() -> None:
    registry = make_registry(
        InlinePlugin(Losses("same"), "dist-a", "1.0"), InlinePlugin(Losses("same", "other"), "dist-b", "2.0")
    )
    assert [(c.plugin.distribution, c.name) for c in registry.components] == [
        ("dist-a", "same"),
        ("dist-b", "same"),
        ("dist-b", "other"),
    ]
    assert [registry.is_conflicted(c) for c in registry.components] == [True, True, False]
    assert registry.get("loss", "other").name == "other"
    with pytest.raises(PluginError, match=r"loss 'same' is provided by both dist-a 1\.0 and dist-b 2\.0"):
        registry.get("loss", "same")


def test_unknown_name_suggests_the_closest_and_lists_what_is_available() -> None:
    registry = make_registry(InlinePlugin(Losses("flow_grpo", "dpo"), "losses", "1.0"))
    with pytest.raises(PluginError) as caught:
        registry.get("loss", "flow_grp")
    assert caught.value.message == "unknown loss 'flow_grp'; did you mean 'flow_grpo'? available: dpo, flow_grpo"
    assert caught.value.hint == "`omni-rl plugins --components` lists every plugin and what it provides"


def test_unknown_name_suggests_a_dotted_name_with_that_ending() -> None:
    registry = make_registry(InlinePlugin(Losses("acme.my_loss", "dpo"), "acme", "1.0"))
    assert registry.unknown("loss", "my_loss")[0].startswith("unknown loss 'my_loss'; did you mean 'acme.my_loss'?")


def test_unknown_name_mentions_plugins_that_failed() -> None:
    class Raising:
        @hookimpl
        def omni_rl_losses(self) -> list[LossSpec]:
            raise RuntimeError("no GPU here")

    registry = make_registry(InlinePlugin(Losses("dpo"), "losses", "1.0"), InlinePlugin(Raising(), "acme-gpu", "0.5"))
    message, _ = registry.unknown("loss", "gpu_loss")
    assert message == (
        "unknown loss 'gpu_loss'; available: dpo; plugins that failed to load: "
        "acme-gpu 0.5 (omni_rl_losses: raised RuntimeError: no GPU here)"
    )


def test_no_provider_of_a_kind_says_what_to_install() -> None:
    registry = make_registry(InlinePlugin(Losses("dpo"), "losses", "1.0"))
    with pytest.raises(PluginError) as caught:
        registry.get("model", "sd3")
    assert caught.value.message == "unknown model 'sd3': no installed plugin provides a model"
    assert caught.value.hint.startswith("install a plugin that provides one, e.g. pip install omni-rl-sd3")


def test_no_provider_messages_use_the_right_article_and_a_config_line_says_what_to_install() -> None:
    class Raising:
        @hookimpl
        def omni_rl_samplers(self) -> list[SamplerSpec]:
            raise RuntimeError("no GPU here")

    registry = make_registry(InlinePlugin(Losses("dpo"), "losses", "1.0"))
    assert registry.unknown("algorithm", "flow_grpo")[0] == (
        "unknown algorithm 'flow_grpo': no installed plugin provides an algorithm"
    )
    assert (
        registry.unknown("advantage", "grpo")[0]
        == "unknown advantage 'grpo': no installed plugin provides an advantage"
    )
    assert registry.unknown_problem("model", "sd3") == (
        "unknown model 'sd3': no installed plugin provides a model "
        "(install a plugin that provides one, e.g. pip install omni-rl-sd3)"
    )
    assert registry.unknown_problem("loss", "dpp") == registry.unknown("loss", "dpp")[0], "a provider exists"
    failing = make_registry(InlinePlugin(Raising(), "acme-gpu", "0.5"))
    assert failing.unknown_problem("sampler", "sde") == (
        "unknown sampler 'sde': no installed plugin provides a sampler (install a plugin that provides one, e.g. "
        "pip install omni-rl-flow-grpo); plugins that failed to load: acme-gpu 0.5 "
        "(omni_rl_samplers: raised RuntimeError: no GPU here)"
    )


def test_unknown_kind() -> None:
    with pytest.raises(PluginError, match=r"unknown component kind 'losses'; did you mean 'loss'\?"):
        make_registry().get("losses", "x")


def test_a_hook_that_raises_makes_its_plugin_an_error_and_drops_its_components() -> None:
    class HalfBroken:
        @hookimpl
        def omni_rl_samplers(self) -> list[SamplerSpec]:
            return [SamplerSpec(name="fine", factory=_factory)]

        @hookimpl
        def omni_rl_models(self) -> list[ModelSpec]:
            return [ModelSpec(name="Bad Name", factory=_factory)]

    registry = make_registry(InlinePlugin(HalfBroken(), "half", "1.0"), InlinePlugin(Losses("ok"), "good", "1.0"))
    half, good = registry.plugins
    assert half.status == "error"
    assert half.error == (
        "omni_rl_models: raised ValueError: component name 'Bad Name' is not lower_snake "
        "(dotted prefixes like 'acme.my_loss' are allowed)"
    )
    assert good.status == "active"
    assert [c.name for c in registry.components] == ["ok"]


def test_a_hook_returning_the_wrong_record_type_is_reported_with_its_distribution() -> None:
    class Confused:
        @hookimpl
        def omni_rl_samplers(self) -> list[LossSpec]:
            return [LossSpec(name="oops", factory=_factory)]

    registry = make_registry(InlinePlugin(Confused(), "confused-dist", "3.1"))
    (info,) = registry.plugins
    assert (info.label, info.status) == ("confused-dist 3.1", "error")
    assert info.error == "omni_rl_samplers: returned a LossSpec 'oops'; expected SamplerSpec records"


def test_a_hook_returning_something_that_is_not_a_record() -> None:
    class Strings:
        @hookimpl
        def omni_rl_losses(self) -> list[str]:
            return ["flow_grpo"]

    (info,) = make_registry(InlinePlugin(Strings(), "strings", "1")).plugins
    assert info.error == "omni_rl_losses: returned a str; expected LossSpec records"


def test_a_plugin_providing_a_name_twice_is_an_error() -> None:
    (info,) = make_registry(InlinePlugin(Losses("twice", "twice"), "dup", "1")).plugins
    assert (info.status, info.error) == ("error", "provides loss 'twice' more than once")


def test_a_hook_may_return_a_generator_or_nothing() -> None:
    class Lazy:
        @hookimpl
        def omni_rl_losses(self) -> Any:
            yield LossSpec(name="lazy", factory=_factory)

        @hookimpl
        def omni_rl_samplers(self) -> None:
            return None

    registry = make_registry(InlinePlugin(Lazy(), "lazy", "1"))
    assert [c.name for c in registry.components] == ["lazy"]


def test_aliases_and_dotted_names_resolve() -> None:
    registry = make_registry(InlinePlugin(Losses("acme.my_loss", aliases=("acme.mine",)), "acme", "1.0"))
    assert registry.get("loss", "acme.mine").name == "acme.my_loss"
    assert registry.names("loss") == ["acme.my_loss"]


def test_plugin_versions_lists_every_distribution_once_with_its_status() -> None:
    class Broken:
        @hookimpl
        def omni_rl_losses(self) -> list[LossSpec]:
            raise ImportError("x")

    registry = make_registry(
        InlinePlugin(Losses("a"), "dist-a", "1.0", name="first"),
        InlinePlugin(Samplers("b"), "dist-a", "1.0", name="second"),
        InlinePlugin(Broken(), "broken", "9"),
    )
    off = PluginInfo(
        name="off:off",
        distribution="acme-off",
        version="0.2",
        entry_point_name="off",
        entry_point_value="acme_off.hooks",
        status="disabled",
    )
    registry = Registry([*registry.plugins, off], registry.components)
    assert registry.plugin_versions() == [
        "acme-off==0.2  # disabled",
        "broken==9  # error: omni_rl_losses: raised ImportError: x",
        "dist-a==1.0",
    ]


def test_collect_marks_the_manager_so_a_second_collect_agrees() -> None:
    class Broken:
        @hookimpl
        def omni_rl_losses(self) -> list[LossSpec]:
            raise KeyError("x")

    pm = make_manager(InlinePlugin(Broken(), "broken", "1"), InlinePlugin(Losses("a"), "fine", "1"))
    first, second = Registry.collect(pm), Registry.collect(pm)
    assert [i.status for i in first.plugins] == [i.status for i in second.plugins] == ["error", "active"]


def test_algorithm_records_have_defaults_and_are_never_built() -> None:
    spec = AlgorithmSpec(name="preset", defaults={"loss": {"name": "x"}})
    with pytest.raises(TypeError, match="algorithm presets are not built"):
        spec.factory(None, None)
