"""Every first-party distribution under plugins/ can be installed on its own (issue 47): it bounds the versions of
the core and of the first-party plugins it needs (a 0.2 core may break it), and every first-party package its code
or its tests import is one it declares (a dependency, or an extra such as ``test`` or ``pretraining``), so that
``nox -s tests_plugin`` installs exactly what it imports and nothing it only gets by luck from the monorepo."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import tomli
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

ROOT = Path(__file__).parents[2]
PROJECTS = sorted(ROOT.glob("plugins/omni-rl-*/pyproject.toml"))
#: the core and its 0.1 series: what every first-party requirement on the core or a sibling says
SERIES = SpecifierSet(">=0.1,<0.2")
#: ``import omni_rl_x``, ``from omni_rl_x.y import z``, ``importorskip("omni_rl_x")``, ``import_module("omni_rl_x")``
IMPORT = re.compile(
    r"^\s*(?:from|import)\s+(omni_rl_[a-z0-9_]+)|(?:importorskip|import_module)\(\s*[\"'](omni_rl_[a-z0-9_]+)",
    re.M,
)


def _project(pyproject: Path) -> dict:
    return tomli.loads(pyproject.read_text())


def _top_packages(pyproject: Path) -> list[str]:
    """The import packages a distribution ships (hatch's ``packages = ["src/omni_rl_x"]``)."""
    packages = _project(pyproject)["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]
    return [Path(p).name for p in packages]


#: import package -> distribution name, for every first-party distribution
DISTRIBUTIONS = {
    package: canonicalize_name(_project(p)["project"]["name"]) for p in PROJECTS for package in _top_packages(p)
}


def _requirements(pyproject: Path) -> list[Requirement]:
    project = _project(pyproject)["project"]
    extras = project.get("optional-dependencies", {})
    return [Requirement(text) for text in [*project.get("dependencies", []), *(r for e in extras.values() for r in e)]]


def _first_party(requirement: Requirement) -> bool:
    name = canonicalize_name(requirement.name)
    return name == "omni-rl" or name in DISTRIBUTIONS.values()


@pytest.mark.parametrize("pyproject", PROJECTS, ids=[p.parent.name for p in PROJECTS])
def test_the_core_and_first_party_plugins_are_bounded_to_the_0_1_series(pyproject: Path) -> None:
    own = canonicalize_name(_project(pyproject)["project"]["name"])
    requirements = [r for r in _requirements(pyproject) if _first_party(r)]
    core = [r for r in requirements if canonicalize_name(r.name) == "omni-rl"]
    assert core, f"{own} does not declare the core (omni-rl>=0.1,<0.2, or omni-rl[train]>=0.1,<0.2)"
    for requirement in requirements:
        assert requirement.specifier == SERIES, f"{requirement}: bound it as {requirement.name}{SERIES}"


@pytest.mark.parametrize("pyproject", PROJECTS, ids=[p.parent.name for p in PROJECTS])
def test_every_first_party_package_it_imports_is_declared(pyproject: Path) -> None:
    directory = pyproject.parent
    own = set(_top_packages(pyproject))
    declared = {canonicalize_name(r.name) for r in _requirements(pyproject)}
    undeclared: dict[str, list[str]] = {}
    for source in sorted([*directory.glob("src/**/*.py"), *directory.glob("tests/**/*.py")]):
        for match in IMPORT.finditer(source.read_text()):
            package = match.group(1) or match.group(2)
            if package in own or package not in DISTRIBUTIONS or DISTRIBUTIONS[package] in declared:
                continue
            undeclared.setdefault(DISTRIBUTIONS[package], []).append(str(source.relative_to(directory)))
    assert not undeclared, f"imported but not declared (a dependency or an extra such as test): {undeclared}"


def test_the_import_pattern_sees_every_form() -> None:
    text = 'import omni_rl_a\nfrom omni_rl_b.c import d\n    from omni_rl_e import f\nimportorskip("omni_rl_g")\n'
    text += 'importlib.import_module("omni_rl_h")\nx = "omni_rl_i"\nfrom omni_rl import hookimpl\n'
    assert [m.group(1) or m.group(2) for m in IMPORT.finditer(text)] == [
        "omni_rl_a",
        "omni_rl_b",
        "omni_rl_e",
        "omni_rl_g",
        "omni_rl_h",
    ]
