"""Fixtures of this plugin's tests, defined in wan_helpers (importable by name from the test modules)."""

from wan_helpers import tiny_wan22_path, tiny_wan_path  # noqa: F401 - fixtures
