"""Meta-tests: every hook is tested and documented with its exact signature; docs cover the contracts."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args

import attrs
import pytest

from omni_rl import hookspecs
from omni_rl import testing as omni_testing
from omni_rl.config import schema
from omni_rl.plugins import HOOK_NAMES
from omni_rl.protocols import OPTIONAL_MEMBERS, Loss, View, iter_protocols

ROOT = Path(__file__).resolve().parents[2]
HOOKS_MD = (ROOT / "docs" / "hooks.md").read_text()
CONFIG_MD = (ROOT / "docs" / "config.md").read_text()
PLUGINS_MD = (ROOT / "docs" / "plugins.md").read_text()


def signature(function: Callable[..., Any]) -> str:
    """``name(params) -> return`` exactly as written in the source (annotations are strings there)."""
    sig = inspect.signature(function)
    params = []
    star = False
    for param in sig.parameters.values():
        if param.kind is param.KEYWORD_ONLY and not star:
            params.append("*")
        star = star or param.kind in (param.KEYWORD_ONLY, param.VAR_POSITIONAL)
        text = param.name
        if param.annotation is not param.empty:
            text += f": {param.annotation}"
        if param.default is not param.empty:
            text += f" = {param.default!r}"
        params.append(text)
    return f"{function.__name__}({', '.join(params)}) -> {sig.return_annotation}"


def test_the_hooks_are_the_hookspecs_functions() -> None:
    marked = [name for name in HOOK_NAMES if hasattr(getattr(hookspecs, name), f"{hookspecs.PROJECT_NAME}_spec")]
    assert marked == list(HOOK_NAMES) and len(HOOK_NAMES) == 8


@pytest.mark.parametrize("hook", HOOK_NAMES)
def test_every_hook_has_a_test(hook: str) -> None:
    tests = [p for p in Path(__file__).parent.rglob("test_*.py") if p.name != Path(__file__).name]
    assert any(re.search(rf"\bdef test_{hook}\b", p.read_text()) for p in tests), f"no test_{hook}"


@pytest.mark.parametrize("hook", HOOK_NAMES)
def test_every_hook_is_documented_with_its_exact_signature(hook: str) -> None:
    expected = signature(getattr(hookspecs, hook))
    assert re.fullmatch(rf"{hook}\(\) -> Iterable\[[A-Za-z]+Spec\]", expected), expected
    assert f"\n## {hook}\n" in HOOKS_MD, f"no '## {hook}' section in docs/hooks.md"
    section = HOOKS_MD.split(f"\n## {hook}\n", 1)[1].split("\n## ", 1)[0]
    assert f"```python\n{expected}\n```" in section


@pytest.mark.parametrize(("kind", "protocol"), list(iter_protocols()))
def test_every_protocol_member_is_documented_with_its_signature(kind: str, protocol: type) -> None:
    assert f"omni_rl.protocols.{protocol.__name__}" in HOOKS_MD
    for name, value in vars(protocol).items():
        if name.startswith("_") and name != "__call__":
            continue
        if callable(value):
            documented = signature(value).replace("(self, ", "(").replace("(self)", "()").replace("|", "\\|")
            assert f"`{documented.replace(value.__name__, name, 1)}`" in HOOKS_MD, f"{protocol.__name__}.{name}"
    for name, annotation in inspect.get_annotations(protocol).items():
        assert f"`{name}: {annotation}`" in HOOKS_MD, f"{protocol.__name__}.{name}"


def _protocol_section(protocol: type) -> str:
    """The docs/hooks.md section (one hook) that documents ``protocol``."""
    (section,) = [s for s in HOOKS_MD.split("\n## ") if f"`omni_rl.protocols.{protocol.__name__}`" in s]
    return section


def _documented_optional_members(section: str) -> set[str]:
    """Member names in the first column of the section's "Optional members" table."""
    if "Optional members" not in section:
        return set()
    table = section.split("Optional members", 1)[1].split("\n\n", 2)[1]
    cells = [row.split(" | ", 1)[0] for row in table.splitlines() if row.startswith("| `")]
    return {name for cell in cells for name in re.findall(r"`([a-z_]+)\(", cell)}


def _sources_using(name: str) -> list[Path]:
    sources = [*(ROOT / "core" / "omni_rl").rglob("*.py"), *ROOT.glob("plugins/*/src/**/*.py")]
    used = re.compile(rf"[\".]{name}\b")
    return [p for p in sources if p.name != "protocols.py" and used.search(p.read_text())]


@pytest.mark.parametrize(("kind", "protocol"), list(iter_protocols()))
def test_every_optional_member_is_documented_described_and_used(kind: str, protocol: type) -> None:
    expected = set(OPTIONAL_MEMBERS.get(kind, ()))
    assert _documented_optional_members(_protocol_section(protocol)) == expected
    source = inspect.getsource(inspect.getmodule(protocol))  # the class's docstring or comments describe them
    protocol_source = source.split(f"class {protocol.__name__}(", 1)[1].split("\nclass ", 1)[0]
    for name in expected:
        assert name in protocol_source, f"{protocol.__name__} does not describe its optional member {name}"
        assert _sources_using(name), f"optional member {name} is called nowhere"


def test_every_loss_view_is_documented() -> None:
    lines = _protocol_section(Loss).splitlines()
    (row,) = [line for line in lines if line.startswith("| `requirements: LossRequirements` |")]
    assert get_args(View) and all(f'`"{view}"`' in row for view in get_args(View)), row
    assert frozenset(get_args(View)) == omni_testing.loss.VIEWS


@pytest.mark.parametrize(
    "section", [schema.RunConfig, schema.ClusterConfig, schema.DataConfig, schema.OptimConfig, schema.LogConfig]
)
def test_every_core_key_is_in_the_config_reference(section: type) -> None:
    for field in attrs.fields(section):
        assert f"| `{field.name}` |" in CONFIG_MD, f"{section.__name__}.{field.name}"


def test_every_conformance_suite_is_documented() -> None:
    suites = [name for name in omni_testing.__all__ if name.endswith("Conformance") and name != "SpecConformance"]
    assert len(suites) == 9
    for suite in suites:
        assert f"`{suite}`" in PLUGINS_MD, suite
        if suite != "PluginConformance":
            assert f"`omni_rl.testing.{suite}`" in HOOKS_MD, suite


def test_requirements_plugins_lists_every_first_party_plugin_once() -> None:
    """requirements-plugins.txt is the one list the README's install command, nox and CI read: a plugin directory
    missing from it would be neither installed nor tested, and a listed path that does not exist breaks the install."""
    listed = [
        line.split("#", 1)[0].strip()[3:].strip().split("[", 1)[0]
        for line in (ROOT / "requirements-plugins.txt").read_text().splitlines()
        if line.split("#", 1)[0].strip().startswith("-e ")
    ]
    on_disk = sorted(f"plugins/{p.name}" for p in (ROOT / "plugins").iterdir() if (p / "pyproject.toml").exists())
    assert sorted(listed) == on_disk
    assert len(listed) == len(set(listed))
    readme = (ROOT / "README.md").read_text()
    assert "-r requirements-plugins.txt" in readme.split("## Quickstart", 1)[1].split("```", 2)[1]


def test_every_first_party_hooks_module_imports_the_contract_from_the_package_face() -> None:
    """One import face for plugins (docs/plugins.md, "What a plugin may import"): the first-party hooks modules
    use ``from omni_rl import hookimpl, ...`` as the docs teach, not the modules behind it."""
    hooks = [p for p in sorted(ROOT.glob("plugins/*/src/*/hooks.py")) if "@hookimpl" in p.read_text()]
    assert len(hooks) >= 18  # omni-rl-shapes-motion ships a model and implements no hook
    for path in hooks:
        text = path.read_text()
        assert re.search(r"^from omni_rl import .*\bhookimpl\b", text, re.M), path
        behind = re.findall(r"^\s*from omni_rl\.(hookspecs|specs|context) import", text, re.M)
        assert not behind, f"{path}: imports omni_rl.{behind[0]} instead of the package face"
