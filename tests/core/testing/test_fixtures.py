"""docs/plugins.md's opt-in: ``pytest_plugins = ["omni_rl.testing.fixtures"]`` in a plugin's top-level
conftest.py gives its tests the fixtures. Run as a separate pytest session (pytester), exactly as a plugin
repository would, so the documented line itself is what is tested."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

PLUGINS_MD = Path(__file__).resolve().parents[3] / "docs" / "plugins.md"

PLUGIN_TESTS = """
import omni_rl
from omni_rl import LossSpec, hookimpl
from omni_rl.plugins import load_plugins
from omni_rl.testing import InlinePlugin


class Losses:
    @hookimpl
    def omni_rl_losses(self):
        return [LossSpec(name="acme.my_loss", factory=lambda config, ctx: config, summary="a loss")]


def test_make_and_use_registry(make_registry, use_registry):
    registry = use_registry(make_registry(InlinePlugin(Losses(), "acme-losses", "1.0")))
    assert omni_rl.get_registry() is registry
    assert registry.names("loss") == ["acme.my_loss"]


def test_fake_distribution_is_discovered(fake_distribution, plugin_env):
    hooks = "from omni_rl import hookimpl\\n\\n@hookimpl\\ndef omni_rl_losses():\\n    return []\\n"
    fake_distribution("acme-fake", "2.0", entry_points={"fake": "acme_fake.hooks"}, modules={"acme_fake.hooks": hooks})
    (info,) = [i for i in load_plugins({"OMNI_RL_LOAD_PLUGINS": "acme-fake"}).infos if i.status == "active"]
    assert (info.distribution, info.version) == ("acme-fake", "2.0")


def test_tmp_run_dir_is_empty(tmp_run_dir):
    assert tmp_run_dir.is_dir() and not any(tmp_run_dir.iterdir())
"""


def test_the_documented_conftest_line_provides_the_fixtures(pytester: pytest.Pytester) -> None:
    (line,) = set(
        re.findall(r"`(pytest_plugins = \[[^`]*\])` in your top-level\s+`conftest.py`", PLUGINS_MD.read_text())
    )
    assert line == 'pytest_plugins = ["omni_rl.testing.fixtures"]'
    pytester.makeconftest(line + "\n")
    pytester.makepyfile(test_acme=textwrap.dedent(PLUGIN_TESTS))
    result = pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)


def test_without_the_line_the_fixtures_are_missing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_acme=textwrap.dedent(PLUGIN_TESTS))
    result = pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=3)
    result.stdout.fnmatch_lines(["*fixture 'make_registry' not found*"])
