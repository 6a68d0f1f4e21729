"""Fixtures of this plugin's tests, defined in z_image_helpers (importable by name from the test modules)."""

from z_image_helpers import tiny_turbo_path, tiny_z_path, z_model  # noqa: F401 - fixtures
