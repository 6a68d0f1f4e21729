"""Fixtures of this plugin's tests, defined in flux2_helpers (importable by name from the test modules)."""

from flux2_helpers import base_model, tiny_base_path, tiny_distilled_path  # noqa: F401 - fixtures
