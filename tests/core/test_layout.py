"""The core's layout (README "Layout", docs/design.md): the plugin contract at the top level, the host in
role-named packages that stack from the ground up, no import running back up and no two packages importing each
other. Read from the sources' imports (module-level and lazy ones alike), so a new module cannot break it quietly.
"""

from __future__ import annotations

import ast
import collections
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "core" / "omni_rl"

#: what a plugin imports: the only modules at the top level of omni_rl
CONTRACT = {
    "__init__",
    "auto_batch",
    "batch",
    "benchmark",
    "context",
    "data",
    "data_images",
    "data_parquet",
    "errors",
    "hookspecs",
    "package_paths",
    "plugins",
    "protocols",
    "registry",
    "seeding",
    "specs",
    "validators",
}

#: the packages from the ground up: each may import only those before it (and the contract)
ORDER = [
    "compat",
    "contract",
    "reporting",
    "config",
    "engine",
    "rundir",
    "runtime",
    "evaluation",
    "rewards",
    "train",
    "serving",
    "cli",
    "testing",
]


def _unit(module: str) -> str:
    parts = module.split(".")[1:]
    return parts[0] if parts and (CORE / parts[0]).is_dir() else "contract"


def _arrows() -> dict[str, set[tuple[str, str]]]:
    """unit -> {(imported unit, "file:line")}, for every ``from omni_rl... import`` in the core."""
    arrows: dict[str, set[tuple[str, str]]] = collections.defaultdict(set)
    for path in CORE.rglob("*.py"):
        here = _unit(".".join(("omni_rl", *path.relative_to(CORE).with_suffix("").parts)))
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                continue
            if node.module != "omni_rl" and not node.module.startswith("omni_rl."):
                continue
            names = [f"omni_rl.{a.name}" for a in node.names] if node.module == "omni_rl" else [node.module]
            for name in names:
                there = _unit(name)
                if there != here:
                    arrows[here].add((there, f"{path.relative_to(CORE)}:{node.lineno}"))
    return arrows


def test_the_top_level_holds_only_the_plugin_contract() -> None:
    assert {p.stem for p in CORE.glob("*.py")} == CONTRACT
    assert {p.name for p in CORE.iterdir() if p.is_dir() and p.name != "__pycache__"} == set(ORDER) - {"contract"}


def test_no_import_runs_back_up() -> None:
    up = []
    for here, targets in _arrows().items():
        for there, where in targets:
            if ORDER.index(there) <= ORDER.index(here):
                continue
            # the package face's build() and load_config() import the config package when called: the face is
            # the API's entry, kept cheap to import, not a layer below config
            if where.startswith("__init__.py:") and there == "config":
                continue
            up.append(f"{here} -> {there} ({where})")
    assert not up, "imports that run back up:\n" + "\n".join(sorted(up))


def test_no_two_packages_import_each_other() -> None:
    arrows = {here: {there for there, _ in targets} for here, targets in _arrows().items()}
    pairs = sorted(
        f"{a} <-> {b}"
        for a in arrows
        for b in arrows[a]
        if a < b and a in arrows.get(b, set()) and "contract" not in (a, b)
    )
    assert not pairs, pairs
