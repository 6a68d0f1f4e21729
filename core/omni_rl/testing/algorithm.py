"""Conformance suite for algorithm presets (:class:`omni_rl.specs.AlgorithmSpec`)."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from omni_rl.config import preset_problems, resolve_config
from omni_rl.config.schema import ResolvedConfig
from omni_rl.errors import ConfigError
from omni_rl.registry import Registry
from omni_rl.specs import AlgorithmSpec
from omni_rl.testing._base import SpecConformance


class AlgorithmConformance(SpecConformance):
    """Subclass with a ``spec`` fixture (the preset).

    Optional fixture: ``registry`` (default: the installed plugins, since a preset names components of
    other plugins too). Checks: the defaults name real sections, installed components and options those
    components accept; a config naming only the preset, a model and (when the preset has none) a reward
    resolves, and takes the components the preset names.

    ``complete_with``: the raw ``model`` / ``reward`` sections that complete the config, for presets whose model
    needs options (e.g. ``{"model": {"name": "sd3", "options": {"path": "unused/by/resolution"}}}``); the test
    skips when a component named there is not installed. Left empty, the first installed model (no options) and
    reward are used, and a model that needs options skips the test.
    """

    spec_class: ClassVar[type[AlgorithmSpec]] = AlgorithmSpec
    complete_with: ClassVar[dict[str, Any]] = {}

    @pytest.fixture
    def registry(self) -> Registry:
        from omni_rl import get_registry

        return get_registry()

    def test_is_not_built(self, spec: AlgorithmSpec) -> None:
        """Presets fill config sections; they have no component (no `component` test applies)."""
        assert isinstance(spec, AlgorithmSpec)

    def test_defaults_are_valid(self, spec: AlgorithmSpec, registry: Registry) -> None:
        assert preset_problems(spec, registry) == []

    def test_a_config_with_only_the_preset_resolves(self, spec: AlgorithmSpec, registry: Registry) -> None:
        config = self.resolved_preset(spec, registry)
        assert config.file.algorithm is not None and config.file.algorithm.name == spec.name
        for section in ("sampler", "advantage", "loss", "rollout"):
            if section in spec.defaults:
                assert getattr(config.file, section).name == spec.defaults[section]["name"], section

    def resolved_preset(self, spec: AlgorithmSpec, registry: Registry) -> ResolvedConfig:
        """The preset completed with ``complete_with`` (or the first model and reward), resolved; skips the
        calling test when what completes it is not installed. Subclasses check their own defaults on it."""
        raw: dict[str, Any] = {"algorithm": {"name": spec.name}, **self.complete_with}
        for kind, section in self.complete_with.items():
            for entry in section if isinstance(section, list) else [section]:
                if registry.find(kind, entry["name"]) is None:
                    pytest.skip(f"needs {kind} {entry['name']!r} installed to complete the config")
        if "model" not in spec.defaults and "model" not in raw:
            models = registry.names("model")
            if not models:
                pytest.skip("no model installed to complete the config")
            raw["model"] = {"name": models[0], "options": {}}
        if "reward" not in spec.defaults and "reward" not in raw:
            rewards = registry.names("reward")
            if not rewards:
                pytest.skip("no reward installed to complete the config")
            raw["reward"] = [{"name": rewards[0]}]
        if registry.find("algorithm", spec.name) is None:
            pytest.fail(f"the registry does not provide algorithm {spec.name!r}: give a `registry` fixture")
        try:
            config: ResolvedConfig = resolve_config(raw, registry, source=f"preset {spec.name!r}")
        except ConfigError as exc:
            problems = [line for line in exc.message.splitlines() if line.startswith("  - ")]
            if not self.complete_with and problems and all("@ $.model.options" in line for line in problems):
                pytest.skip("the model needs options (a path): set `complete_with` to complete the config")
            raise
        return config
