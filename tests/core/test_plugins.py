"""The plugin manager: entry-point discovery (with fake installed distributions), isolation of broken
plugins, the selection variables, and rejection of misspelled hooks."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from core_fake_dists import BROKEN_HOOKS, LIGHT_HOOKS

from omni_rl import LossSpec, hookimpl
from omni_rl.errors import PluginError
from omni_rl.plugins import HOOK_NAMES, PluginManager, load_plugins

FakeDist = Callable[..., Path]

MISSPELLED_HOOKS = """
from omni_rl import hookimpl

@hookimpl
def omni_rl_loses():
    return []
"""


def _by_dist(pm: PluginManager) -> dict[str, object]:
    return {info.distribution: info for info in pm.infos}


def test_installed_plugin_is_discovered_from_its_entry_point(fake_distribution: FakeDist, plugin_env: None) -> None:
    fake_distribution(
        "acme-toys", "1.2", entry_points={"toys": "acme_toys.hooks"}, modules={"acme_toys.hooks": LIGHT_HOOKS}
    )
    pm = load_plugins({"OMNI_RL_LOAD_PLUGINS": "acme-toys"})
    info = _by_dist(pm)["acme-toys"]
    assert (info.status, info.version, info.entry_point, info.error) == (
        "active",
        "1.2",
        "toys = acme_toys.hooks",
        None,
    )
    assert [spec.name for result in pm.hook.omni_rl_losses() for spec in result] == ["toy_ppo"]


def test_a_plugin_that_fails_to_import_is_recorded_and_the_others_load(fake_distribution: FakeDist) -> None:
    fake_distribution(
        "acme-broken", "0.1", entry_points={"broken": "acme_broken.hooks"}, modules={"acme_broken.hooks": BROKEN_HOOKS}
    )
    fake_distribution(
        "acme-toys", "1.0", entry_points={"toys": "acme_toys.hooks"}, modules={"acme_toys.hooks": LIGHT_HOOKS}
    )
    pm = load_plugins({"OMNI_RL_LOAD_PLUGINS": "acme-broken,acme-toys"})
    broken, toys = _by_dist(pm)["acme-broken"], _by_dist(pm)["acme-toys"]
    assert broken.status == "error"
    assert broken.error == "ModuleNotFoundError: No module named 'omni_rl_missing_dependency'"
    assert "Traceback" in broken.details
    assert toys.status == "active"


def test_disable_variable_skips_a_plugin_without_importing_it(fake_distribution: FakeDist) -> None:
    fake_distribution(
        "acme-broken", "0.1", entry_points={"broken": "acme_broken.hooks"}, modules={"acme_broken.hooks": BROKEN_HOOKS}
    )
    fake_distribution(
        "acme-toys", "1.0", entry_points={"toys": "acme_toys.hooks"}, modules={"acme_toys.hooks": LIGHT_HOOKS}
    )
    # the broken one by entry-point name; everything else (first-party plugins too) by the load list
    pm = load_plugins({"OMNI_RL_LOAD_PLUGINS": "acme-broken,acme_toys", "OMNI_RL_DISABLE_PLUGINS": "broken"})
    assert _by_dist(pm)["acme-broken"].status == "disabled"
    assert _by_dist(pm)["acme-broken"].error is None
    assert _by_dist(pm)["acme-toys"].status == "active"


def test_a_distribution_whose_metadata_has_no_name_is_an_error_and_the_others_load(
    fake_distribution: FakeDist,
) -> None:
    site = fake_distribution(
        "acme-nameless", "0.2", entry_points={"nameless": "acme_nameless.hooks"}, modules={"acme_nameless.hooks": ""}
    )
    folder = site / "acme_nameless-0.2.dist-info"
    (folder / "METADATA").write_text("Metadata-Version: 2.1\nVersion: 0.2\n")  # a half-written install
    fake_distribution(
        "acme-toys", "1.0", entry_points={"toys": "acme_toys.hooks"}, modules={"acme_toys.hooks": LIGHT_HOOKS}
    )
    pm = load_plugins({"OMNI_RL_LOAD_PLUGINS": "acme-nameless,acme-toys"})
    nameless = _by_dist(pm)["acme_nameless"]
    assert (nameless.status, nameless.version, nameless.entry_point) == (
        "error",
        "0.2",
        "nameless = acme_nameless.hooks",
    )
    assert nameless.error == (
        f"the distribution's METADATA ({folder}) has no Name; reinstall the distribution or remove that folder"
    )
    assert "acme_nameless.hooks" not in __import__("sys").modules, "a plugin that cannot be attributed is not run"
    assert _by_dist(pm)["acme-toys"].status == "active"


def test_a_distribution_without_a_metadata_file_is_named_after_its_folder(fake_distribution: FakeDist) -> None:
    site = fake_distribution("acme-bare", entry_points={"bare": "acme_bare.hooks"}, modules={"acme_bare.hooks": ""})
    (site / "acme_bare-1.0.dist-info" / "METADATA").unlink()
    (site / "acme_bare-1.0.dist-info").rename(site / "acme_bare.dist-info")  # no version in the folder either
    pm = load_plugins({"OMNI_RL_LOAD_PLUGINS": "acme-bare"})
    bare = _by_dist(pm)["acme_bare"]
    assert (bare.version, bare.status) == ("unknown", "error")
    assert bare.error == (
        f"the distribution's METADATA ({site / 'acme_bare.dist-info'}) has no Name; "
        "reinstall the distribution or remove that folder"
    )


def test_load_variable_loads_only_the_named_plugins(fake_distribution: FakeDist) -> None:
    fake_distribution(
        "acme-toys", "1.0", entry_points={"toys": "acme_toys.hooks"}, modules={"acme_toys.hooks": LIGHT_HOOKS}
    )
    fake_distribution(
        "acme-other", "1.0", entry_points={"other": "acme_other.hooks"}, modules={"acme_other.hooks": LIGHT_HOOKS}
    )
    pm = load_plugins({"OMNI_RL_LOAD_PLUGINS": "Acme_Toys"})
    statuses = {info.distribution: info.status for info in pm.infos}
    assert statuses["acme-toys"] == "active"
    assert set(statuses.values()) <= {"active", "disabled"}
    assert [name for name, status in statuses.items() if status == "active"] == ["acme-toys"]


def test_an_unknown_name_in_the_load_variable_is_a_warning_with_a_suggestion(fake_distribution: FakeDist) -> None:
    fake_distribution(
        "acme-toys", "1.0", entry_points={"toys": "acme_toys.hooks"}, modules={"acme_toys.hooks": LIGHT_HOOKS}
    )
    pm = load_plugins({"OMNI_RL_LOAD_PLUGINS": "acme-toyz"})
    assert pm.warnings == [
        "OMNI_RL_LOAD_PLUGINS names 'acme-toyz', which is not an installed plugin (did you mean 'acme-toys'?)"
    ]


def test_an_installed_plugin_with_a_misspelled_hook_is_an_error(fake_distribution: FakeDist) -> None:
    fake_distribution(
        "acme-typo", "2.0", entry_points={"typo": "acme_typo.hooks"}, modules={"acme_typo.hooks": MISSPELLED_HOOKS}
    )
    pm = load_plugins({"OMNI_RL_LOAD_PLUGINS": "acme-typo"})
    info = _by_dist(pm)["acme-typo"]
    assert info.status == "error"
    assert info.error == "unknown hook 'omni_rl_loses' (did you mean 'omni_rl_losses'?)"


def test_registering_a_misspelled_hook_inline_raises(plugin_manager: PluginManager) -> None:
    class Typo:
        @hookimpl
        def omni_rl_sampler(self) -> list[object]:
            return []

    with pytest.raises(PluginError) as caught:
        plugin_manager.register(Typo(), name="typo", distribution="typo-dist", version="0.1")
    assert (
        caught.value.message
        == "plugin typo-dist 0.1: unknown hook 'omni_rl_sampler' (did you mean 'omni_rl_samplers'?)"
    )
    assert "omni_rl_samplers" in caught.value.hint
    plugin_manager.check_pending()  # nothing half-registered is left behind


def test_a_hook_function_without_the_marker_is_reported(plugin_manager: PluginManager) -> None:
    class Unmarked:
        def omni_rl_losses(self) -> list[LossSpec]:
            return []

    with pytest.raises(PluginError, match=r"omni_rl_losses is not marked with @hookimpl"):
        plugin_manager.register(Unmarked(), name="unmarked")


def test_an_implementation_with_arguments_the_spec_lacks_is_rejected(plugin_manager: PluginManager) -> None:
    class Extra:
        @hookimpl
        def omni_rl_losses(self, config: object) -> list[LossSpec]:
            return []

    with pytest.raises(PluginError, match=r"plugin inline 0: .*Argument\(s\) {.config.} are declared in the hookimpl"):
        plugin_manager.register(Extra(), name="extra")


def test_check_pending_rejects_hooks_without_spec() -> None:
    pm = PluginManager()

    class Sneaky:
        @hookimpl
        def omni_rl_lossez(self) -> list[LossSpec]:
            return []

    pm._pm.register(Sneaky(), name="sneaky")  # bypassing register()'s own check, as a foreign caller could
    with pytest.raises(PluginError, match="omni_rl_lossez"):
        pm.check_pending()


def test_hook_names_are_the_hookspecs() -> None:
    assert HOOK_NAMES == (
        "omni_rl_models",
        "omni_rl_samplers",
        "omni_rl_rollout_backends",
        "omni_rl_reward_models",
        "omni_rl_advantage_estimators",
        "omni_rl_losses",
        "omni_rl_algorithms",
        "omni_rl_benchmarks",
    )
