"""Fixtures of this plugin's tests, defined in wan_helpers and wan_i2v_helpers (importable by name from the test
modules)."""

from wan_helpers import tiny_wan22_path, tiny_wan_path  # noqa: F401 - fixtures
from wan_i2v_helpers import tiny_i2v_paths  # noqa: F401 - fixtures
