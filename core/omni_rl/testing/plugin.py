"""Conformance suite for a plugin's ``hooks.py`` as a whole."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from typing import ClassVar

import pytest

from omni_rl.testing.inline import InlinePlugin, make_registry


class PluginConformance:
    """Subclass with a ``hooks_module`` fixture (the dotted name of the plugin's hooks module).

    Checks: importing it and calling its hooks import no heavy package (``heavy_modules``: listing plugins and
    checking configs must stay fast and work without a GPU stack); every hook it implements is a real hook; every
    record is valid, of its hook's kind, and named once.
    """

    heavy_modules: ClassVar[tuple[str, ...]] = ("torch", "diffusers", "transformers", "ray", "peft")

    @pytest.fixture
    def hooks_module(self) -> str:
        pytest.fail(f"{type(self).__name__} must define a `hooks_module` fixture (e.g. 'omni_rl_acme.hooks')")

    def test_importing_hooks_imports_no_heavy_package(self, hooks_module: str) -> None:
        """Nor does calling its hooks (``omni-rl plugins`` and config checks call every one)."""
        code = (
            f"import json, sys, omni_rl.hookspecs as specs, {hooks_module} as hooks; "
            "[getattr(hooks, n)() for n in dir(specs) if n.startswith('omni_rl_') and hasattr(hooks, n)]; "
            f"print(json.dumps([m for m in {list(self.heavy_modules)!r} if m in sys.modules]))"
        )
        out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
        assert json.loads(out.strip().splitlines()[-1]) == [], "import these inside the factories instead"

    def test_hooks_yield_valid_records(self, hooks_module: str) -> None:
        module = importlib.import_module(hooks_module)
        registry = make_registry(InlinePlugin(module, distribution=hooks_module, name=hooks_module))
        (info,) = registry.plugins
        assert info.status == "active", info.error
        assert registry.components, "the plugin provides no component"
        assert not registry.conflicts
