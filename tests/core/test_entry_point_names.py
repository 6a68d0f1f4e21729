"""One naming convention for entry points (issue 33): every first-party and contrib plugin's entry point in the
``omni_rl`` group is its distribution's name without ``omni-rl-`` (lower case, hyphens), and the old spellings
(``qwen_image``, ``rewards_remote``) still select or disable the plugin, since selection compares PEP 503
normalised names."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomli

from omni_rl.plugins import canonical_name, parse_name_list

ROOT = Path(__file__).parents[2]
PROJECTS = sorted([*ROOT.glob("plugins/omni-rl-*/pyproject.toml"), *ROOT.glob("contrib/omni-rl-*/pyproject.toml")])
#: first-party libraries the plugins depend on: no components, so no entry point (every other project has one)
LIBRARIES = {"omni-rl-pipelines"}


@pytest.mark.parametrize("pyproject", PROJECTS, ids=[p.parent.name for p in PROJECTS])
def test_the_entry_point_is_the_distribution_name_without_the_prefix(pyproject: Path) -> None:
    project = tomli.loads(pyproject.read_text())["project"]
    if project["name"] in LIBRARIES:
        assert "omni_rl" not in project.get("entry-points", {}), "a library registers no plugin"
        return
    (name,) = project["entry-points"]["omni_rl"]
    assert name == project["name"].removeprefix("omni-rl-"), "lower case with hyphens, no omni-rl- prefix"
    assert name == name.lower() and "_" not in name and "." not in name


def test_old_underscore_names_still_match() -> None:
    disabled = parse_name_list("qwen_image, Rewards_Remote")
    assert canonical_name("qwen-image") in disabled and canonical_name("rewards-remote") in disabled


def test_contrib_plugins_are_not_in_the_default_run() -> None:
    listed = (ROOT / "requirements-plugins.txt").read_text()
    assert "contrib/" not in listed
    assert any(p.parent.parent.name == "contrib" for p in PROJECTS), "contrib/ holds at least one plugin"
