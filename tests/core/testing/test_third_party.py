"""The worked example of docs/plugins.md, installed with pip from its directory like a user would.

The plugin's files are taken from the docs (each code block after a ``<!-- file: ... -->`` marker), so the
guide cannot drift from what works: installed with ``pip install --target`` (the venv stays untouched), the
plugin appears in ``omni-rl plugins``, its loss is selectable by its dotted name, and its own conformance
tests pass.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from core_fake_dists import LIGHT_CONFIG, LIGHT_HOOKS, run_cli, with_prompts

from omni_rl.testing import write_fake_distribution

DOCS = Path(__file__).resolve().parents[3] / "docs" / "plugins.md"
FILE_BLOCK = re.compile(r"<!-- file: (?P<path>[^ ]+) -->\n```[a-z]*\n(?P<body>.*?)```", re.DOTALL)


def plugin_files() -> dict[str, str]:
    return {m["path"]: m["body"] for m in FILE_BLOCK.finditer(DOCS.read_text())}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("third_party")
    for relative, body in plugin_files().items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(body)
    site = root / "site"
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--no-deps",
        "--no-build-isolation",
        "--no-index",
        "--disable-pip-version-check",
        "--target",
        str(site),
        str(root / "acme-losses"),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    write_fake_distribution(
        site, "acme-toys", "1.0", entry_points={"toys": "acme_toys.hooks"}, modules={"acme_toys.hooks": LIGHT_HOOKS}
    )
    return root


def test_the_example_adds_a_loss_in_under_50_lines() -> None:
    files = plugin_files()
    assert set(files) == {
        "acme-losses/pyproject.toml",
        "acme-losses/src/acme_losses/__init__.py",
        "acme-losses/src/acme_losses/hooks.py",
        "acme-losses/src/acme_losses/loss.py",
        "acme-losses/tests/test_my_loss.py",
    }
    code = sum(len(body.splitlines()) for path, body in files.items() if "/src/" in path)
    assert code < 50
    assert f"{code} lines of Python" in DOCS.read_text()


def test_the_installed_plugin_is_listed_with_its_loss(installed: Path) -> None:
    result = run_cli(["plugins", "--components", "--json"], pythonpath=[installed / "site"], load="acme-losses")
    assert result.returncode == 0, result.stderr
    rows = {row["distribution"]: row for row in json.loads(result.stdout)}
    assert rows["acme-losses"] == {
        "distribution": "acme-losses",
        "version": "1.0.0",
        "entry_point": "acme-losses = acme_losses.hooks",
        "status": "active",
        "error": None,
        "components": [
            {"kind": "loss", "name": "acme.my_loss", "summary": "PPO-clipped policy gradient on per-step log-probs"}
        ],
    }
    table = run_cli(["plugins", "--components"], pythonpath=[installed / "site"], load="acme-losses")
    assert "acme.my_loss" in table.stdout and "acme-losses 1.0.0" in table.stdout


def test_its_loss_is_selectable_by_dotted_name(installed: Path, tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        with_prompts(LIGHT_CONFIG, tmp_path) + '\n[loss]\nname = "acme.my_loss"\noptions = { clip_ratio = 0.1 }\n'
    )
    site, load = [installed / "site"], "acme-losses,acme-toys"
    check = run_cli(["check", str(config)], pythonpath=site, load=load)
    assert check.returncode == 0, check.stderr
    printed = run_cli(["run", str(config), "--print-config"], pythonpath=site, load=load)
    assert printed.returncode == 0, printed.stderr
    assert '[loss]\nname = "acme.my_loss"\n\n[loss.options]\nclip_ratio = 0.1\n' in printed.stdout
    bad = run_cli(["check", str(config), "--set", "loss.options.clip_ratio=0"], pythonpath=site, load=load)
    assert bad.returncode == 2
    assert "  - invalid value: 'clip_ratio' must be > 0: 0.0 @ $.loss.options.clip_ratio" in bad.stderr.splitlines()


def test_its_own_conformance_tests_pass(installed: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(installed / "site")}
    env.pop("OMNI_RL_LOAD_PLUGINS", None)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(installed),
            str(installed / "acme-losses" / "tests"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=installed,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"\b1[0-9] passed\b", result.stdout), result.stdout
